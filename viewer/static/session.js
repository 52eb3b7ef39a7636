// Session page: runs, per-turn facts of the chosen run (latest by default, and it says so), feedback.
import { api, badge, enc, fill, h, shortTime, showError } from "./dom.js";
import { renderIntegrity } from "./integrity.js";
import { clip, slotTriad, verdictText } from "./facts-view.js";

const sessionId = document.body.dataset.sessionId;
const chosenRun = new URLSearchParams(location.search).get("run_id");
let boundRun = null;

function runRow(run) {
  const here = `/sessions/${enc(sessionId)}`;
  return h("tr", { class: run.run_id === boundRun ? "selected" : "", dataset: { runId: run.run_id } },
    h("td", {}, h("code", {}, run.run_id)),
    h("td", {}, run.kind),
    h("td", {}, shortTime(run.created_at)),
    h("td", {}, run.turns),
    h("td", {}, badge(run.capture_status ?? "missing", run.capture_status ?? "invalid")),
    h("td", {}, badge(run.integrity, run.integrity)),
    h("td", {},
      h("a", { href: `${here}?run_id=${enc(run.run_id)}` }, "facts"), " · ",
      h("a", { href: `${here}/runs/${enc(run.run_id)}` }, "replay")),
  );
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

function factsRow(turn) {
  const repeated = turn.repeated_asks ?? [];
  return h("tr", { class: repeated.length ? "repeated" : "", dataset: { turnIndex: turn.turn_index } },
    h("td", {}, turn.turn_index),
    h("td", { class: "state" }, `${turn.state_before ?? "∅"} → ${turn.state ?? "∅"}`),
    h("td", {}, triadCell(turn)),
    h("td", {}, writesCell(turn)),
    h("td", {}, guardsCell(turn)),
    h("td", { class: "verdict" }, verdictText(turn.verdict)),
    h("td", { class: "repeat" }, repeated.length ? `asked again: ${repeated.join(", ")}` : ""),
    h("td", {}, (turn.messages ?? []).map((message) => h("div", {}, `${message.role}: ${clip(message.text)}`)),
      (turn.tools ?? []).map((tool) => h("div", { class: `status-${tool.status}` }, `tool ${tool.name} (${tool.status})`))),
  );
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
  fill(document.querySelector("#facts tbody"), (facts.turns ?? []).map(factsRow));
  document.getElementById("facts-note").textContent = (facts.notes ?? []).join(" ");
}

async function loadRuns() {
  const answer = await api(`/api/sessions/${enc(sessionId)}/runs`);
  fill(document.querySelector("#runs tbody"), answer.runs.map(runRow));
}

document.getElementById("feedback").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const body = { rating: Number(form.get("rating")), comment: String(form.get("comment") ?? "") };
  if (chosenRun) body.run_id = chosenRun;
  const output = document.getElementById("feedback-result");
  try {
    const answer = await api(`/api/sessions/${enc(sessionId)}/feedback`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    output.textContent = `Saved for ${answer.run_id}${answer.fallback_to_latest_run ? " (the latest run)" : ""}.`;
  } catch (error) {
    output.textContent = `Not saved: ${error.message}`;
  }
});

loadFacts()
  .then(loadRuns)
  .then(() => { document.body.dataset.ready = "true"; })
  .catch((error) => { showError(error); return loadRuns().catch(() => {}); });
