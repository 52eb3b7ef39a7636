// Session page: what went wrong in any of its runs, the runs (eval runs too), the whole session's
// transcript, per-turn facts of the chosen run (latest by default, and it says so), past feedback
// and the feedback form.
import { api, badge, enc, fill, h, idNode, jsonForm, markReady, showError, timeNode } from "./dom.js";
import { renderIntegrity } from "./integrity.js";
import { mountTranscript } from "./transcript-view.js";
import { askedAgainText, clip, costText, hasLatency, latencySummaryText, latencyText, modelCallText, slotTriad, usageText, verdictText } from "./facts-view.js";
import { captureNode, feedbackText, kindText, labelsNode, scoresNode, tokensText } from "./runs-view.js";
import { mountScores } from "./scores-view.js";

const REFRESH_MS = 2000; // while a run records, the runs and problems are fetched again this often

const sessionId = document.body.dataset.sessionId;
const chosenRun = new URLSearchParams(location.search).get("run_id");
const here = `/sessions/${enc(sessionId)}`;
let boundRun = null;
let refreshTimer = null;

function replayHref(runId, seq) {
  return `${here}/runs/${enc(runId)}${seq != null ? `#seq=${seq}` : ""}`;
}

function runRow(run) {
  return h("tr", { class: run.run_id === boundRun ? "selected" : "", dataset: { runId: run.run_id, status: run.status } },
    h("td", {}, idNode(run.run_id)),
    h("td", {}, kindText(run)),
    h("td", {}, timeNode(run.created_at)),
    h("td", {}, badge(run.status, run.status)),
    h("td", {}, run.turns),
    h("td", {}, run.model_calls),
    h("td", {}, tokensText(run)),
    h("td", { class: run.problems.length ? "problem-count has-problems" : "problem-count" }, run.problems.length || "–"),
    h("td", {}, feedbackText(run.feedback)),
    h("td", { class: "capture" }, captureNode(run)),
    h("td", { class: "labels" }, labelsNode(run, (name, value) => { location.href = `/?${new URLSearchParams({ [name]: value })}`; })),
    h("td", { class: "scores" }, scoresNode(run, (name) => { location.href = `/?${new URLSearchParams({ score: name })}`; })),
    h("td", {},
      h("a", { href: `${here}?run_id=${enc(run.run_id)}` }, "facts"), " · ",
      h("a", { href: replayHref(run.run_id) }, "replay"), " · ",
      h("a", { href: `/api/sessions/${enc(sessionId)}/runs/${enc(run.run_id)}/bundle`, download: "" }, "download")),
  );
}

function renderProblems(runs) {
  const items = runs.flatMap((run) => run.problems.map((problem) =>
    h("li", { class: `problem kind-${problem.kind}`, dataset: { runId: run.run_id, kind: problem.kind } },
      h("a", { href: replayHref(run.run_id, problem.seq) }, h("code", {}, run.run_id.slice(0, 12))),
      " ", timeNode(run.created_at), " · ", problem.message)));
  fill(document.getElementById("problem-list"), items);
  document.getElementById("problems").hidden = items.length === 0;
}

function feedbackRow(record) {
  return h("tr", { dataset: { runId: record.run_id } },
    h("td", {}, timeNode(record.at)),
    h("td", {}, h("code", {}, String(record.run_id ?? "").slice(0, 12))),
    h("td", {}, record.rating),
    h("td", { class: "comment" }, record.comment ?? ""));
}

async function loadFeedback() {
  const answer = await api(`/api/sessions/${enc(sessionId)}/feedback`);
  fill(document.querySelector("#past-feedback tbody"), answer.feedback.map(feedbackRow));
  document.getElementById("no-feedback").hidden = answer.feedback.length > 0;
}

function triadCell(turn) {
  const triad = slotTriad(turn);
  const line = (label, slots, cls) => [
    h("span", { class: "label" }, label),
    h("span", { class: cls }, slots === null ? "unknown (turn not finished)" : slots.length ? slots.join(", ") : "–"),
  ];
  return h("div", { class: "triad" },
    line("filled", triad.filled, "filled"), line("written", triad.written, "written"), line("missing", triad.missing, "missing"));
}

function writesCell(turn) {
  const attributed = (turn.slot_writes ?? []).map((write) =>
    h("div", { class: "slot-write" }, `${write.slot} ← `, h("span", { class: "source" }, write.source ?? "?"),
      write.seq != null ? h("span", { class: "muted" }, ` #${write.seq}`) : ""));
  const diffs = (turn.unattributed_diffs ?? []).map((diff) =>
    h("div", { class: "slot-write unattributed", title: "found by diffing the slots; no code said who wrote it" },
      `${diff.slot} (unattributed)`, diff.seq != null ? h("span", { class: "muted" }, ` #${diff.seq}`) : ""));
  return [...attributed, ...diffs];
}

function guardsCell(turn) {
  const guards = (turn.guards ?? []).map((guard) =>
    h("div", { class: guard.passed ? "guard-pass" : "guard-fail" }, `${guard.passed ? "✓" : "✗"} ${guard.name}`));
  if (turn.guards_truncated) guards.push(h("div", { class: "muted" }, `+${turn.guards_truncated} more (capped at 24)`));
  return guards;
}

/** Row classes: a repeated ask (of required slots), a question asked again (by its words) and a slow turn
 * (voice latency over the threshold) are each flagged. */
function flags(turn) {
  return [(turn.repeated_asks ?? []).length ? "repeated" : "", turn.asked_again ? "asked-again" : "",
    turn.slow === true ? "slow" : ""].filter(Boolean).join(" ");
}

function latencyCell(turn) {
  return h("td", { class: "latency" }, latencyText(turn.latency),
    turn.slow === true ? h("span", { class: "slow-flag" }, " SLOW") : "",
    turn.interrupted === true ? h("span", { class: "muted" }, " interrupted") : "");
}

function factsRow(turn) {
  const repeated = turn.repeated_asks ?? [];
  return h("tr", { class: flags(turn), dataset: { turnIndex: turn.turn_index } },
    h("td", {}, turn.turn_index),
    h("td", { class: "state" }, `${turn.state_before ?? "∅"} → ${turn.state ?? "∅"}`),
    h("td", {}, triadCell(turn)),
    h("td", {}, writesCell(turn)),
    h("td", {}, guardsCell(turn)),
    h("td", { class: "verdict" }, verdictText(turn.verdict)),
    h("td", { class: "repeat" }, repeated.length ? `asked again: ${repeated.join(", ")}` : "",
      turn.asked_again ? h("div", { class: "asked-again" }, askedAgainText(turn.asked_again)) : ""),
    latencyCell(turn),
    h("td", {}, (turn.messages ?? []).map((message) => h("div", {}, `${message.role}: ${clip(message.text)}`)),
      (turn.tools ?? []).map((tool) => h("div", { class: `status-${tool.status}` }, `tool ${tool.name} (${tool.status})`))),
    h("td", { class: "model-calls" }, (turn.model_calls ?? []).map((call) => h("div", { class: "model-call" }, modelCallText(call)))),
  );
}

/** The run's totals: tokens over its model calls, and voice latency p50/p95 with its slow turns. */
function runSummary(facts) {
  const usage = usageText(facts.usage_totals);
  const latency = latencySummaryText(facts.latency);
  const slow = (facts.latency?.slow_turns ?? []).map((entry) => `turn ${entry.turn_index}`);
  const cost = costText(facts.cost);
  return [
    usage ? h("div", { class: "usage-totals" }, `tokens: ${usage}`) : "",
    cost ? h("div", { class: "cost" }, `cost: ${cost}`) : "",
    latency ? h("div", { class: "latency-summary" }, `voice latency (user stopped → agent started): ${latency}`,
      slow.length ? h("span", { class: "slow-flag" }, ` · slow: ${slow.join(", ")}`) : "") : "",
  ];
}

async function loadFacts() {
  const query = chosenRun ? `?run_id=${enc(chosenRun)}` : "";
  const facts = await api(`/api/sessions/${enc(sessionId)}/facts${query}`);
  boundRun = facts.run_id;
  document.getElementById("facts-run").textContent = facts.run_id;
  document.getElementById("facts-binding").textContent = facts.fallback_to_latest_run
    ? `No run chosen: showing the latest run, ${facts.run_id}.`
    : `Showing the chosen run, ${facts.run_id}.`;
  renderIntegrity(document.getElementById("integrity"), facts.integrity);
  const table = document.getElementById("facts");
  table.dataset.latency = String(hasLatency(facts.turns));
  fill(table.querySelector("tbody"), (facts.turns ?? []).map(factsRow));
  fill(document.getElementById("facts-summary"), runSummary(facts));
  document.getElementById("facts-note").textContent = (facts.notes ?? []).join(" ");
}

// Session-wide facts (every run, repeated asks across run boundaries) come from
// `…/facts?scope=session` where the server has it; an older server answers one run's facts, and the
// section then stays hidden.
function where(place) {
  return place && typeof place === "object" ? `${String(place.run_id ?? "").slice(0, 12)} turn ${place.turn_index ?? "?"}` : "";
}

/** One repeated ask of interfaces §3: {run_id, turn_index, slots, asked_before_in: {run_id, turn_index}}. */
function repeatedText(ask) {
  if (typeof ask !== "object" || ask === null) return String(ask);
  const slots = Array.isArray(ask.slots) ? ask.slots.join(", ") : clip(ask, 60);
  const before = ask.asked_before_in ? `, asked before in ${where(ask.asked_before_in)}` : "";
  return `${slots} asked again in ${where(ask)}${before}`;
}

/** Voice latency per run (p50/p95) and over the session, with the slow turns naming their run. */
function sessionLatency(answer, runOrder) {
  const perRun = (answer.runs ?? []).map((run) => [run, latencySummaryText(run.latency)]).filter(([, text]) => text)
    .map(([run, text]) => h("li", { dataset: { runId: run.run_id } },
      `run ${runOrder.get(run.run_id) ?? "?"} · `, h("code", {}, String(run.run_id ?? "").slice(0, 12)), `: ${text}`));
  const whole = latencySummaryText(answer.latency);
  if (!whole) return perRun;
  const slow = (answer.latency.slow_turns ?? []).map(where);
  return [...perRun, h("li", { class: "session-total" }, `whole session: ${whole}`,
    slow.length ? h("span", { class: "slow-flag" }, ` · slow: ${slow.join(", ")}`) : "")];
}

async function loadSessionFacts() {
  let answer;
  try {
    answer = await api(`/api/sessions/${enc(sessionId)}/facts?scope=session`);
  } catch {
    return; // not offered here
  }
  if (answer?.scope !== "session" || !Array.isArray(answer.turns)) return;
  const runOrder = new Map((answer.runs ?? []).map((run, index) => [run.run_id, index + 1]));
  const table = document.getElementById("session-facts");
  table.dataset.latency = String(hasLatency(answer.turns));
  fill(table.querySelector("tbody"), answer.turns.map((turn) =>
    h("tr", { class: flags(turn), dataset: { runId: turn.run_id } },
      h("td", {}, `${runOrder.get(turn.run_id) ?? "?"} · `, h("code", {}, String(turn.run_id ?? "").slice(0, 12))),
      h("td", {}, turn.turn_index),
      h("td", { class: "state" }, `${turn.state_before ?? "∅"} → ${turn.state ?? "∅"}`),
      h("td", { class: "verdict" }, verdictText(turn.verdict)),
      h("td", { class: "repeat" }, (turn.repeated_asks ?? []).length
        ? `asked again: ${turn.repeated_asks.map((ask) => (typeof ask === "string" ? ask : (ask.slots ?? []).join(", "))).join(", ")}` : ""),
      latencyCell(turn))));
  fill(document.getElementById("session-latency"), sessionLatency(answer, runOrder));
  fill(document.getElementById("session-repeats"), (answer.repeated_asks ?? []).map((ask) => h("li", {}, repeatedText(ask))));
  document.getElementById("session-wide").hidden = false;
}

async function loadRuns() {
  const answer = await api(`/api/sessions/${enc(sessionId)}/runs`);
  fill(document.querySelector("#runs tbody"), answer.runs.map(runRow));
  renderProblems(answer.runs);
  const recording = answer.runs.some((run) => run.capture_status === "recording");
  clearTimeout(refreshTimer);
  if (recording) refreshTimer = setTimeout(() => loadRuns().catch(showError), REFRESH_MS);
  return answer.runs;
}

jsonForm(document.getElementById("feedback"), document.getElementById("feedback-result"),
  `/api/sessions/${enc(sessionId)}/feedback`, (fields) => ({
    rating: Number(fields.get("rating")), comment: String(fields.get("comment") ?? ""), ...(chosenRun ? { run_id: chosenRun } : {}),
  }), () => Promise.all([loadFeedback(), loadRuns()]));

const facts = loadFacts();
const runs = facts.catch(() => {}).then(loadRuns); // the bound run is known first, to mark its row
// Session-wide facts cover live runs: an eval-only session has none to ask for.
const sessionWide = runs.then((listed) => (listed ?? []).some((run) => run.kind === "live") && loadSessionFacts());
const transcript = mountTranscript(document.getElementById("transcript-section"), sessionId);
const scores = mountScores(document.getElementById("scores-section"), sessionId, chosenRun, loadRuns);
Promise.allSettled([facts, runs, loadFeedback(), sessionWide, transcript, scores]).then((results) => {
  const failed = results.find((result) => result.status === "rejected");
  if (failed) showError(failed.reason);
  else markReady();
});
