// Replay page: the conversation as the reducer rebuilds it at a cursor (seq), a scrubber,
// play/pause paced by `at` and ordered by `seq`, step ±1, jump to turn, follow mode over SSE for a
// recording run, and offline replay of a downloaded bundle with no server calls.
//
// A long sealed run (more than LONG_RUN events, indexed by the server) is read in windows: the page
// paints from the server's view of the checkpoint at the cursor (`…/state?seq=&recent=&through=`:
// the last RECENT messages, tools, verdicts and diagnostics, and whatever the window's records
// touch) and folds the window's records (`…/events`) on it; playing, stepping past the window,
// seeking or scrolling to the top of the conversation fetches another window. Its timeline and
// state graph are drawn from per-turn summaries (`…/turns`), never from every record.
import { Replayer, runEvents, stateFrom } from "./reducer.js";
import { api, clearError, fill, h, markReady, runPath, showError, timeNode } from "./dom.js";
import { renderIntegrity } from "./integrity.js";
import { parseTar, readBundle } from "./bundle.js";
import { buildTimeline, buildTurnTimeline, turnGraphEvents } from "./timeline.js";
import { TimelineView } from "./timeline-view.js";
import { renderDetails } from "./details.js";
import { buildGraph } from "./graph.js";
import { GraphView } from "./graph-view.js";
import { SpanTree } from "./spans-view.js";

const MAX_IDLE_MS = 2000; // a long quiet stretch in the journal plays as at most 2 s
const TICK_MS = 16;
const PAGE = 10000;
const TIMELINE_REBUILD_MS = 250; // a live run's timeline is rebuilt at most this often
const SHARE_WHILE_PLAYING_MS = 500;
const LONG_RUN = 5000; // a sealed run with more events than this is read in windows
const WINDOW = 2048; // records a window reaches past its cursor
const RECENT = 50; // messages (tools, verdicts, diagnostics) a window's view keeps; doubled on scrolling up
const MAX_RECENT = 1000;
const PREFETCH = 256; // while playing, the next window is fetched this many records before the end
const SEEK_SETTLE_MS = 120;

const $ = (id) => document.getElementById(id);
const ui = {
  conversation: $("conversation"), cursor: $("cursor"), cursorLabel: $("cursor-label"), play: $("play"),
  speed: $("speed"), turnJump: $("turn-jump"), follow: $("follow"), followState: $("follow-state"),
  integrity: $("integrity"), details: $("details"),
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
  revealCursor: false,
  sharedAt: -Infinity,
  timeline: null,
  timelineBuiltAt: -Infinity,
  timelinePending: false,
  selected: null,
  long: null, // a long run read in windows: {lastSeq, turns, base, end, omitted, recent, loading, token}
};

const timelineView = new TimelineView($("timeline"), { onPick: pick });
const graphView = new GraphView($("graph"));
const spanTree = new SpanTree($("spans"), spanPage);

// -- model: the reducer's Replayer owns the seq-ordered journal --------------------------------

function events() {
  return view.replayer.events;
}

function lastSeq() {
  return view.long ? view.long.lastSeq : view.replayer.lastSeq;
}

/** True when the cursor's state can be folded from the window in hand (always, for a run read whole). */
function inWindow(seq) {
  return !view.long || (seq >= view.long.base && seq <= view.long.end);
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
  view.timeline = null;
}

function appendEvents(records) {
  view.replayer.extend(records);
  noteEvents(records);
  view.timeline = null;
}

// -- timeline and details ----------------------------------------------------------------------

/** Rebuild the timeline and the state graph when the journal changed (a live run's at most every
 * TIMELINE_REBUILD_MS); both are laid out from the whole journal, so seeking never moves them. */
function refreshTimeline({ now = false } = {}) {
  if (view.timeline) return;
  const wait = view.timelineBuiltAt + TIMELINE_REBUILD_MS - performance.now();
  if (!now && view.live && wait > 0) {
    if (!view.timelinePending) {
      view.timelinePending = true;
      setTimeout(() => { view.timelinePending = false; scheduleRender(); }, wait);
    }
    return;
  }
  view.timeline = view.long ? buildTurnTimeline(view.long.turns) : buildTimeline(events());
  view.timelineBuiltAt = performance.now();
  timelineView.setTimeline(view.timeline);
  graphView.setGraph(buildGraph(view.long ? turnGraphEvents(view.long.turns) : events()));
}

function spanByKey(key) {
  refreshTimeline({ now: true });
  return view.timeline.spans.find((span) => span.key === key) ?? null;
}

/** Select a span for details; a click on the timeline also seeks to its first record. */
function pick(span, { seekTo = true } = {}) {
  view.selected = span.key;
  timelineView.select(span.key);
  renderDetails(ui.details, span);
  if (seekTo) {
    stop();
    seek(span.startSeq);
  }
}

function noteFirstSeen(records) {
  for (const event of records) {
    for (const key of [event.message_id && `m:${event.message_id}`, event.tool_call_id && `t:${event.tool_call_id}`]) {
      if (key && !view.firstSeen.has(key)) view.firstSeen.set(key, event.seq);
    }
  }
}

function noteEvents(records) {
  noteFirstSeen(records);
  for (const event of records) {
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

// Why a panel box is empty: nothing of the kind yet at the cursor, or the run records none at all
// (then what would fill it). A long run read in windows does not know the second: it says the first.
const EMPTY = {
  slots: ["No slot written yet at this point.",
    "This run records no slots: otel_session.slot_write() in the app, or a framework's state, fills this box."],
  tools: ["No tool has run yet at this point.", "No tool ran in this run."],
  verdicts: ["No state transition yet at this point.",
    "This run records no state transitions: otel_session.transition() in the app fills this box."],
  diagnostics: ["No problem found so far.", "No problem found."],
};
const EMPTY_TYPES = {
  slots: ["slot_write", "slot_diff"], tools: ["tool_execution_started"], verdicts: ["transition_verdict"], diagnostics: [],
};
let typesSeen = { count: -1, types: new Set() };

/** The record types of the whole run, when the page holds all of it (null for a long run). */
function runTypes() {
  if (view.long) return null;
  const all = events();
  if (typesSeen.count !== all.length) typesSeen = { count: all.length, types: new Set(all.map((event) => event.type)) };
  return typesSeen.types;
}

function fillBox(id, kind, items) {
  if (items.length) return fill($(id), items);
  const types = runTypes();
  const none = types !== null && !EMPTY_TYPES[kind].some((type) => types.has(type));
  return fill($(id), h("div", { class: "empty-state" }, EMPTY[kind][none ? 1 : 0]));
}

function renderPanel(state, event) {
  $("p-turn").textContent = state.turn_index ?? "–";
  $("p-state").textContent = state.state ?? "–";
  $("p-event").textContent = event ? `#${event.seq} ${event.type}` : "–";
  fill($("p-at"), event ? timeNode(event.at) : "–");
  fillBox("p-slots", "slots", Object.entries(state.slots ?? {}).map(([slot, value]) =>
    h("div", {}, h("strong", {}, slot), ": ", typeof value === "string" ? value : JSON.stringify(value))));
  fillBox("p-tools", "tools", (state.tools ?? []).map((tool) =>
    h("div", { class: `status-${tool.status}` }, `${tool.name} · ${tool.status}`)));
  fillBox("p-verdicts", "verdicts", (state.verdicts ?? []).map((verdict) =>
    h("div", {}, `${verdict.from ?? "?"} → ${verdict.to ?? "?"}${verdict.reason ? `: ${verdict.reason}` : ""}`)));
  fillBox("p-diagnostics", "diagnostics", (state.diagnostics ?? []).map((diagnostic) =>
    h("div", { class: `sev-${diagnostic.severity ?? "warning"}` }, `${diagnostic.code}: ${diagnostic.message ?? ""}`)));
}

function render() {
  view.renderQueued = false;
  document.body.dataset.loadingWindow = String(Boolean(view.long?.loading));
  if (!inWindow(view.cursor)) { // its window is on the way: only the scrubber follows the cursor
    ui.cursor.value = String(view.cursor);
    ui.cursorLabel.textContent = `seq ${view.cursor} / ${lastSeq()}`;
    return;
  }
  const state = view.replayer.stateAt(view.cursor);
  const items = [
    ...(state.messages ?? []).map((message) => [view.firstSeen.get(`m:${message.message_id}`) ?? 0, messageView(message)]),
    ...(state.tools ?? []).map((tool) => [view.firstSeen.get(`t:${tool.tool_call_id}`) ?? 0, toolView(tool)]),
  ].sort((a, b) => a[0] - b[0]);
  const omitted = view.long?.omitted?.messages ?? 0;
  fill(ui.conversation, omitted ? h("p", { class: "muted omitted", id: "omitted" },
    `${omitted} earlier message${omitted === 1 ? "" : "s"} not loaded: scroll up for more`) : null,
  items.map(([, node]) => node));
  const index = indexAt(view.cursor);
  const event = index >= 0 ? events()[index] : null;
  renderPanel(state, event);
  ui.cursor.max = String(lastSeq());
  ui.cursor.value = String(view.cursor);
  ui.cursorLabel.textContent = `seq ${view.cursor} / ${lastSeq()}`;
  ui.cursorLabel.dataset.seq = String(view.cursor);
  refreshTimeline();
  timelineView.setCursor(view.cursor);
  graphView.setCursor(view.cursor);
  if (view.following) ui.conversation.scrollTop = ui.conversation.scrollHeight;
  else if (view.revealCursor) reveal(cursorItem(event));
  view.revealCursor = false;
  shareCursor();
  ui.follow.hidden = !view.live || view.following;
  ui.followState.hidden = !view.live;
  ui.followState.textContent = view.following ? "following live" : "detached";
  document.body.dataset.following = String(view.following);
}

/** The conversation item the record at the cursor belongs to, else the newest item shown. */
function cursorItem(event) {
  const children = [...ui.conversation.children];
  const own = event && children.find((node) =>
    (event.message_id && node.dataset.messageId === event.message_id) ||
    (event.tool_call_id && node.dataset.toolCallId === event.tool_call_id));
  return own ?? children[children.length - 1] ?? null;
}

/** Scroll the conversation (only it, never the page) so that `node`'s end is in view. */
function reveal(node) {
  if (!node) return;
  const pane = ui.conversation;
  const top = node.offsetTop - pane.offsetTop;
  const bottom = top + node.offsetHeight;
  if (bottom > pane.scrollTop + pane.clientHeight) pane.scrollTop = bottom - pane.clientHeight + 8;
  else if (top < pane.scrollTop) pane.scrollTop = Math.max(0, top - 8);
}

/** Keep the cursor in the URL (#seq=N), so a position can be shared; while playing at most every
 * SHARE_WHILE_PLAYING_MS (browsers throttle a page that replaces its URL every frame). */
function shareCursor() {
  if (view.offline || view.following || !events().length) return;
  const hash = `#seq=${view.cursor}`;
  const now = performance.now();
  if (location.hash === hash || (view.playTimer && now - view.sharedAt < SHARE_WHILE_PLAYING_MS)) return;
  history.replaceState(null, "", hash);
  view.sharedAt = now;
}

function sharedSeq() {
  const match = /^#seq=(\d{1,12})$/.exec(location.hash);
  return match ? Number(match[1]) : null;
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
  view.revealCursor = true;
  if (!inWindow(view.cursor)) requestWindow();
  scheduleRender();
}

/** Fetch the window at the cursor once it holds still (dragging the scrubber moves it every frame). */
function requestWindow() {
  clearTimeout(view.long.pending);
  view.long.pending = setTimeout(() => {
    if (!inWindow(view.cursor)) loadWindow(view.cursor).catch(showError);
  }, SEEK_SETTLE_MS);
}

function step(delta) {
  if (!events().length && !view.long) return;
  const index = indexAt(view.cursor) + delta;
  if (view.long && index < 0) seek(view.long.base > 0 ? view.long.base - (view.cursor > view.long.base ? 0 : 1) : 0);
  else if (view.long && index >= events().length) seek(Math.min(view.long.end + 1, lastSeq()));
  else seek(index < 0 ? 0 : events()[Math.min(index, events().length - 1)].seq);
}

function atMs(event) {
  const value = Date.parse(event.at);
  return Number.isFinite(value) ? value : 0;
}

/** Whether the cursor is at the run's end (a long run's: past its window, at its last seq). */
function atEnd(index) {
  return index >= events().length - 1 && (!view.long || view.long.end >= view.long.lastSeq);
}

function play() {
  detach();
  stop();
  if (atEnd(indexAt(view.cursor))) {
    view.cursor = 0;
    if (!inWindow(0)) loadWindow(0).catch(showError);
  }
  let owed = 0; // journal milliseconds the clock has run ahead of the cursor
  let last = performance.now();
  ui.play.textContent = "Pause";
  document.body.dataset.playing = "true";
  const tick = () => {
    const now = performance.now();
    owed += (now - last) * Number(ui.speed.value);
    last = now;
    if (!inWindow(view.cursor)) { // waiting for the window the cursor moved into
      view.playTimer = setTimeout(tick, TICK_MS);
      return;
    }
    const list = events();
    let index = indexAt(view.cursor);
    if (view.long && !view.long.loading && view.long.end < view.long.lastSeq && list.length - 1 - index < PREFETCH) {
      loadWindow(view.cursor).catch(showError); // the state at the cursor is the same in the next window
    }
    while (index < list.length - 1) {
      const next = list[index + 1];
      // Order is seq; `at` only paces. Backward timestamps play at once, idle stretches are capped.
      const gap = index < 0 ? 0 : Math.min(Math.max(atMs(next) - atMs(list[index]), 0), MAX_IDLE_MS);
      if (owed < gap) break;
      owed -= gap;
      index += 1;
    }
    if (index >= 0) view.cursor = list[index].seq;
    view.revealCursor = true;
    scheduleRender();
    if (atEnd(index)) stop();
    else view.playTimer = setTimeout(tick, TICK_MS);
  };
  view.playTimer = setTimeout(tick, 0);
}

function stop() {
  clearTimeout(view.playTimer);
  view.playTimer = null;
  scheduleRender(); // shares the position it stopped at
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

/** A page of the run's records for the span tree: the server's `/events`, or the file's in hand. */
async function spanPage(after, limit) {
  if (!view.offline) return api(`${runPath(view.sessionId, view.runId)}/events?after_seq=${after}&limit=${limit}`);
  const start = indexAt(after) + 1;
  const page = events().slice(start, start + limit);
  const more = start + limit < events().length;
  return { events: page, next_after_seq: more ? page[page.length - 1].seq : null, last_seq: lastSeq() };
}

function spansOpened() {
  if ($("spans-section").open && spanTree.loaded === 0 && !spanTree.done) spanTree.loadMore().catch(showError);
}

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

/** Fetch the window of a long run around `seq`: the view of the checkpoint at or before it, then
 * the records from that checkpoint to WINDOW past `seq`. A newer request makes an older one moot. */
async function loadWindow(seq) {
  const long = view.long;
  const token = (long.token += 1);
  long.loading = true;
  const base = runPath(view.sessionId, view.runId);
  const through = Math.min(seq + WINDOW, long.lastSeq);
  try {
    const at = await api(`${base}/state?seq=${seq}&recent=${long.recent}&through=${through}`);
    const records = [];
    let after = at.base_seq;
    while (after < through && token === long.token) {
      const page = await api(`${base}/events?after_seq=${after}&limit=${Math.min(PAGE, through - after)}`);
      for (const record of page.events) if (record.seq <= through) records.push(record);
      if (page.next_after_seq == null || !page.events.length) break;
      after = page.events[page.events.length - 1].seq;
    }
    if (token !== long.token) return;
    view.replayer = new Replayer(records, stateFrom(at.state, at.folded));
    view.firstSeen = new Map(Object.entries(at.first_seq));
    noteFirstSeen(records);
    Object.assign(long, { base: at.base_seq, end: through, omitted: at.omitted });
  } finally {
    if (token === long.token) long.loading = false;
  }
  scheduleRender();
}

/** A long sealed run: the timeline and turn list from its summaries, then the window at the cursor. */
async function loadLongRun(run) {
  const turns = run.turns.rows.map((row) => Object.fromEntries(run.turns.fields.map((field, at) => [field, row[at]])));
  view.long = { lastSeq: run.last_seq, turns, base: 0, end: -1, omitted: null, recent: RECENT,
    loading: false, token: 0, pending: null };
  view.captureStatus = run.capture_status;
  view.live = false;
  view.timeline = null;
  fill(ui.turnJump, h("option", { value: "" }, "jump to…"),
    turns.map((turn) => h("option", { value: turn.start_seq },
      `turn ${turn.turn_index ?? "?"} · ${turn.state_before ?? ""} (seq ${turn.start_seq})`)));
  const shared = sharedSeq();
  view.cursor = Math.min(shared ?? run.last_seq, run.last_seq);
  await Promise.all([loadWindow(view.cursor), loadIntegrity()]);
  scheduleRender();
}

async function loadFromServer() {
  closeStream();
  const run = await api(`${runPath(view.sessionId, view.runId)}/turns`);
  if (run.indexed && run.event_count > LONG_RUN) {
    await loadLongRun(run);
    return;
  }
  view.long = null;
  const snapshot = await loadSnapshot();
  setEvents(snapshot.events);
  view.captureStatus = snapshot.captureStatus;
  view.live = snapshot.captureStatus === "recording";
  await loadIntegrity();
  const shared = sharedSeq();
  if (view.live) {
    attach();
    subscribe();
  } else {
    view.cursor = lastSeq();
    scheduleRender();
  }
  if (shared !== null) seek(shared); // a shared position wins, and detaches a live view
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

/** The bundle a file holds, or an Error saying in one line that it holds none. */
async function bundleOf(file) {
  let files;
  try {
    files = parseTar(await file.arrayBuffer());
  } catch (error) {
    throw new Error(`${file.name} is not an otel-session bundle: ${error.message}`);
  }
  if (!["run.json", "events.ndjson", "capture.json"].some((name) => files.has(name))) {
    throw new Error(`${file.name} is not an otel-session bundle: it holds no run.json, events.ndjson or capture.json`);
  }
  return readBundle(files);
}

async function openBundleFile(file) {
  closeStream();
  stop();
  const bundle = await bundleOf(file);
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
  $("download")?.remove(); // the page now shows the file, not the server's run
  $("download-html")?.remove();
  renderIntegrity(ui.integrity, bundle);
  view.long = null;
  setEvents(runEvents(bundle.events, bundle.manifest));
  view.cursor = lastSeq();
  spanTree.reset(spanPage);
  spansOpened();
  clearError(); // a good file replaces whatever a previous bad file reported
  document.body.dataset.empty = "false";
  scheduleRender();
  requestAnimationFrame(markReady); // after the render queued above
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
$("spans-section").addEventListener("toggle", spansOpened);
if (location.hash === "#spans") { // a link to the span tree: opened, in view
  $("spans-section").open = true;
  $("spans-section").scrollIntoView();
}
ui.conversation.addEventListener("click", (event) => {
  const item = event.target.closest("[data-message-id], [data-tool-call-id]");
  if (!item) return;
  const span = spanByKey(item.dataset.messageId ? `m:${item.dataset.messageId}` : `t:${item.dataset.toolCallId}`);
  if (span) pick(span, { seekTo: false });
});
$("p-event").addEventListener("click", () => {
  const index = indexAt(view.cursor);
  if (index < 0) return;
  const record = events()[index];
  renderDetails(ui.details, { key: `r:${record.seq}`, kind: "record", label: `record #${record.seq} · ${record.type}`, records: [record] });
});
window.addEventListener("hashchange", () => {
  const shared = sharedSeq();
  if (shared !== null && shared !== view.cursor) {
    stop();
    seek(shared);
  }
});

// Keyboard: space play/pause, ← → one record, Home/End first/last; form controls keep their keys.
const KEYS = {
  " ": () => (view.playTimer ? stop() : play()),
  ArrowLeft: () => { stop(); step(-1); },
  ArrowRight: () => { stop(); step(+1); },
  Home: () => { stop(); seek(0); },
  End: () => { stop(); seek(lastSeq()); },
};
document.addEventListener("keydown", (event) => {
  const action = KEYS[event.key];
  if (!action || event.altKey || event.ctrlKey || event.metaKey) return;
  const onScrubber = event.target === ui.cursor && event.key === " "; // the range input has no use for space
  if (!onScrubber && event.target.closest?.("input, select, textarea, button, [contenteditable], summary, [role=listitem]")) return;
  event.preventDefault();
  action();
});
window.addEventListener("resize", () => { if (view.timeline) timelineView.setTimeline(view.timeline); });
for (const type of ["wheel", "touchmove", "keydown"]) ui.conversation.addEventListener(type, detach, { passive: true });
ui.conversation.addEventListener("scroll", () => { // a long run's earlier messages, fetched at the top
  const long = view.long;
  if (!long || long.loading || ui.conversation.scrollTop > 0 || !long.omitted?.messages || long.recent >= MAX_RECENT) return;
  long.recent = Math.min(MAX_RECENT, long.recent * 2);
  loadWindow(view.cursor).catch(showError);
}, { passive: true });
$("bundle-file")?.addEventListener("change", (event) => {
  const [file] = event.target.files;
  if (file) openBundleFile(file).catch(showError);
});

const embedded = document.getElementById("embedded-bundle"); // an exported page (viewer/export.py)
if (embedded) {
  const bytes = Uint8Array.from(atob(embedded.textContent.trim()), (char) => char.charCodeAt(0));
  openBundleFile(new File([bytes], embedded.dataset.name || "bundle.tar")).catch(showError);
} else if (view.offline) {
  document.body.dataset.mode = "offline";
  render();
} else {
  document.body.dataset.mode = "server";
  loadFromServer().then(() => requestAnimationFrame(markReady), showError); // after the first render
}
