// Replay page: the conversation as the reducer rebuilds it at a cursor (seq), a scrubber,
// play/pause paced by `at` and ordered by `seq`, step ±1, jump to turn, follow mode over SSE for a
// recording run, and offline replay of a downloaded bundle with no server calls.
import { Replayer, runEvents } from "./reducer.js";
import { api, fill, h, runPath, shortTime, showError } from "./dom.js";
import { renderIntegrity } from "./integrity.js";
import { parseTar, readBundle } from "./bundle.js";

const MAX_IDLE_MS = 2000; // a long quiet stretch in the journal plays as at most 2 s
const TICK_MS = 16;
const PAGE = 10000;

const $ = (id) => document.getElementById(id);
const ui = {
  conversation: $("conversation"), cursor: $("cursor"), cursorLabel: $("cursor-label"), play: $("play"),
  speed: $("speed"), turnJump: $("turn-jump"), follow: $("follow"), followState: $("follow-state"),
  integrity: $("integrity"),
};

const view = {
  sessionId: document.body.dataset.sessionId,
  runId: document.body.dataset.runId,
  offline: document.body.dataset.offline === "true",
  replayer: new Replayer([]),
  cursor: 0,
  firstSeen: new Map(),
  captureStatus: null,
  live: false,
  following: false,
  source: null,
  playTimer: null,
  renderQueued: false,
};

// -- model: the reducer's Replayer owns the seq-ordered journal --------------------------------

function events() {
  return view.replayer.events;
}

function lastSeq() {
  return view.replayer.lastSeq;
}

/** Index of the last event with seq <= cursor (-1 before the first). */
function indexAt(seq) {
  const list = events();
  let low = 0;
  let high = list.length - 1;
  let found = -1;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (list[middle].seq <= seq) {
      found = middle;
      low = middle + 1;
    } else {
      high = middle - 1;
    }
  }
  return found;
}

function setEvents(records) {
  view.replayer = new Replayer(records);
  view.firstSeen = new Map();
  fill(ui.turnJump, h("option", { value: "" }, "jump to…"));
  noteEvents(events());
}

function appendEvents(records) {
  view.replayer.extend(records);
  noteEvents(records);
}

function noteEvents(records) {
  for (const event of records) {
    for (const key of [event.message_id && `m:${event.message_id}`, event.tool_call_id && `t:${event.tool_call_id}`]) {
      if (key && !view.firstSeen.has(key)) view.firstSeen.set(key, event.seq);
    }
    if (event.type === "turn_started") {
      ui.turnJump.append(h("option", { value: event.seq },
        `turn ${event.turn_index ?? "?"} · ${event.payload?.state ?? ""} (seq ${event.seq})`));
    }
  }
}

// -- rendering ---------------------------------------------------------------------------------

function blockView(block) {
  const label = block.kind === "text" ? null : h("span", { class: "muted" }, `${block.kind} · `);
  return h("div", { class: `block kind-${block.kind}`, dataset: { index: block.index } }, label, block.text ?? "");
}

function messageView(message) {
  return h("article", {
    class: `msg role-${message.role ?? "unknown"}${message.settled ? "" : " partial"}`,
    dataset: { messageId: message.message_id },
  },
  h("div", { class: "meta" }, h("strong", {}, message.role ?? "?"), message.settled ? "" : h("span", {}, "streaming…")),
  (message.blocks ?? []).map(blockView));
}

function toolView(tool) {
  const status = tool.status ?? "running";
  return h("div", { class: "tool", dataset: { toolCallId: tool.tool_call_id } },
    h("span", { class: `badge status-${status}` }, status), " ", h("strong", {}, tool.name ?? "tool"),
    h("span", { class: "muted" }, ` · ${tool.updates ?? 0} updates`));
}

function renderPanel(state, event) {
  $("p-turn").textContent = state.turn_index ?? "–";
  $("p-state").textContent = state.state ?? "–";
  $("p-event").textContent = event ? `#${event.seq} ${event.type}` : "–";
  $("p-at").textContent = event ? shortTime(event.at) : "–";
  fill($("p-slots"), Object.entries(state.slots ?? {}).map(([slot, value]) =>
    h("div", {}, h("strong", {}, slot), ": ", typeof value === "string" ? value : JSON.stringify(value))));
  fill($("p-tools"), (state.tools ?? []).map((tool) =>
    h("div", { class: `status-${tool.status}` }, `${tool.name} · ${tool.status}`)));
  fill($("p-verdicts"), (state.verdicts ?? []).map((verdict) =>
    h("div", {}, `${verdict.from ?? "?"} → ${verdict.to ?? "?"}${verdict.reason ? `: ${verdict.reason}` : ""}`)));
  fill($("p-diagnostics"), (state.diagnostics ?? []).map((diagnostic) =>
    h("div", { class: `sev-${diagnostic.severity ?? "warning"}` }, `${diagnostic.code}: ${diagnostic.message ?? ""}`)));
}

function render() {
  view.renderQueued = false;
  const state = view.replayer.stateAt(view.cursor);
  const items = [
    ...(state.messages ?? []).map((message) => [view.firstSeen.get(`m:${message.message_id}`) ?? 0, messageView(message)]),
    ...(state.tools ?? []).map((tool) => [view.firstSeen.get(`t:${tool.tool_call_id}`) ?? 0, toolView(tool)]),
  ].sort((a, b) => a[0] - b[0]);
  fill(ui.conversation, items.map(([, node]) => node));
  const index = indexAt(view.cursor);
  renderPanel(state, index >= 0 ? events()[index] : null);
  ui.cursor.max = String(lastSeq());
  ui.cursor.value = String(view.cursor);
  ui.cursorLabel.textContent = `seq ${view.cursor} / ${lastSeq()}`;
  ui.cursorLabel.dataset.seq = String(view.cursor);
  if (view.following) ui.conversation.scrollTop = ui.conversation.scrollHeight;
  ui.follow.hidden = !view.live || view.following;
  ui.followState.hidden = !view.live;
  ui.followState.textContent = view.following ? "following live" : "detached";
  document.body.dataset.following = String(view.following);
}

function scheduleRender() {
  if (!view.renderQueued) {
    view.renderQueued = true;
    requestAnimationFrame(render);
  }
}

// -- cursor, play, follow ----------------------------------------------------------------------

function seek(seq, { byUser = true } = {}) {
  if (byUser) detach();
  view.cursor = Math.max(0, Math.min(seq, lastSeq()));
  scheduleRender();
}

function step(delta) {
  if (!events().length) return;
  const index = indexAt(view.cursor) + delta;
  seek(index < 0 ? 0 : events()[Math.min(index, events().length - 1)].seq);
}

function atMs(event) {
  const value = Date.parse(event.at);
  return Number.isFinite(value) ? value : 0;
}

function play() {
  detach();
  stop();
  if (indexAt(view.cursor) >= events().length - 1) view.cursor = 0;
  let owed = 0; // journal milliseconds the clock has run ahead of the cursor
  let last = performance.now();
  ui.play.textContent = "Pause";
  document.body.dataset.playing = "true";
  const tick = () => {
    const now = performance.now();
    owed += (now - last) * Number(ui.speed.value);
    last = now;
    const list = events();
    let index = indexAt(view.cursor);
    while (index < list.length - 1) {
      const next = list[index + 1];
      // Order is seq; `at` only paces. Backward timestamps play at once, idle stretches are capped.
      const gap = index < 0 ? 0 : Math.min(Math.max(atMs(next) - atMs(list[index]), 0), MAX_IDLE_MS);
      if (owed < gap) break;
      owed -= gap;
      index += 1;
    }
    view.cursor = index < 0 ? 0 : list[index].seq;
    scheduleRender();
    if (index >= list.length - 1) stop();
    else view.playTimer = setTimeout(tick, TICK_MS);
  };
  view.playTimer = setTimeout(tick, 0);
}

function stop() {
  clearTimeout(view.playTimer);
  view.playTimer = null;
  ui.play.textContent = "Play";
  document.body.dataset.playing = "false";
}

function detach() {
  if (view.following) {
    view.following = false;
    scheduleRender();
  }
}

function attach() {
  stop();
  view.following = true;
  view.cursor = lastSeq();
  scheduleRender();
}

// -- sources: the server (snapshot + SSE tail) or a bundle file ----------------------------------

async function loadSnapshot() {
  const records = [];
  let after = 0;
  for (;;) {
    const page = await api(`${runPath(view.sessionId, view.runId)}/events?after_seq=${after}&limit=${PAGE}`);
    for (const record of page.events) records.push(record);
    if (page.next_after_seq == null) return { events: records, captureStatus: page.capture_status };
    after = page.next_after_seq;
  }
}

async function loadIntegrity() {
  renderIntegrity(ui.integrity, await api(`${runPath(view.sessionId, view.runId)}/integrity`));
}

async function loadFromServer() {
  closeStream();
  const snapshot = await loadSnapshot();
  setEvents(snapshot.events);
  view.captureStatus = snapshot.captureStatus;
  view.live = snapshot.captureStatus === "recording";
  await loadIntegrity();
  if (view.live) {
    attach();
    subscribe();
  } else {
    view.cursor = lastSeq();
    scheduleRender();
  }
}

function closeStream() {
  if (view.source) view.source.close();
  view.source = null;
}

function subscribe() {
  const source = new EventSource(`${runPath(view.sessionId, view.runId)}/stream?after_seq=${lastSeq()}`);
  view.source = source;
  source.onmessage = (message) => {
    if (view.source !== source) return; // a stream replaced by a snapshot reload
    const record = JSON.parse(message.data);
    if (record.run_id !== view.runId || record.session_id !== view.sessionId) return; // not this run's record
    if (record.seq <= lastSeq()) return; // already in the snapshot
    if (record.seq !== lastSeq() + 1) {
      // A gap: partial recovery is forbidden; drop everything and reload the snapshot.
      loadFromServer().catch(showError);
      return;
    }
    appendEvents([record]);
    if (view.following) view.cursor = record.seq;
    scheduleRender();
  };
  source.addEventListener("capture", (message) => {
    if (view.source !== source) return;
    view.captureStatus = JSON.parse(message.data).status;
    loadIntegrity().catch(showError);
  });
  source.addEventListener("resequenced", () => {
    if (view.source !== source) return;
    loadFromServer().catch(showError); // the seal renumbered the journal: the sealed snapshot replaces it
  });
  source.addEventListener("end", () => {
    if (view.source !== source) return;
    closeStream();
    view.live = false;
    view.following = false;
    loadIntegrity().catch(showError);
    scheduleRender();
  });
}

async function openBundleFile(file) {
  closeStream();
  stop();
  const bundle = readBundle(parseTar(await file.arrayBuffer()));
  view.offline = true;
  view.live = false;
  view.following = false;
  view.sessionId = bundle.manifest?.session_id ?? "";
  view.runId = bundle.manifest?.run_id ?? "";
  document.body.dataset.mode = "offline";
  $("run-id").textContent = `${view.runId} (from ${file.name})`;
  const link = $("session-link");
  link.removeAttribute("href");
  link.textContent = view.sessionId;
  renderIntegrity(ui.integrity, bundle);
  setEvents(runEvents(bundle.events, bundle.manifest));
  view.cursor = lastSeq();
  scheduleRender();
  document.body.dataset.ready = "true";
}

// -- wiring ------------------------------------------------------------------------------------

ui.cursor.addEventListener("input", () => seek(Number(ui.cursor.value)));
$("step-back").addEventListener("click", () => { stop(); step(-1); });
$("step-forward").addEventListener("click", () => { stop(); step(+1); });
ui.play.addEventListener("click", () => (view.playTimer ? stop() : play()));
ui.turnJump.addEventListener("change", () => {
  if (ui.turnJump.value) {
    stop();
    seek(Number(ui.turnJump.value));
  }
});
ui.follow.addEventListener("click", attach);
for (const type of ["wheel", "touchmove", "keydown"]) ui.conversation.addEventListener(type, detach, { passive: true });
$("bundle-file").addEventListener("change", (event) => {
  const [file] = event.target.files;
  if (file) openBundleFile(file).catch(showError);
});

if (view.offline) {
  document.body.dataset.mode = "offline";
  render();
} else {
  document.body.dataset.mode = "server";
  loadFromServer().then(() => { document.body.dataset.ready = "true"; }, showError);
}
