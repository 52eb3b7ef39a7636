// The whole-session transcript on the session page: every run of the session in order, its turns'
// user, assistant and tool lines, a separator between runs; read a few runs a page
// (GET …/transcript?after=&runs=), never the whole session at once.
import { api, enc, fill, h, idNode, showError, timeNode } from "./dom.js";

const RUNS_PER_PAGE = 5;

function runSeparator(run, here) {
  return h("li", { class: "transcript-run", dataset: { runId: run.run_id } },
    h("a", { href: `${here}/runs/${enc(run.run_id)}` }, "run "), idNode(run.run_id), " · ", timeNode(run.created_at),
    run.agent ? ` · ${run.agent}` : "", run.capture_status === "recording" ? h("span", { class: "badge status-recording" }, "recording") : "");
}

function turnLines(turn) {
  const lines = [h("li", { class: "transcript-turn" },
    `turn ${turn.turn_index ?? "?"}`, turn.state_before || turn.state ? h("span", { class: "muted" },
      ` · ${turn.state_before ?? "?"} → ${turn.state ?? "?"}`) : "")];
  for (const message of turn.messages.filter((item) => item.text)) { // a reply of tool calls alone has no text
    lines.push(h("li", { class: `transcript-message role-${message.role}`, dataset: { role: message.role } },
      h("span", { class: "who" }, message.role), h("span", { class: "text" }, message.text)));
  }
  for (const tool of turn.tools) {
    lines.push(h("li", { class: "transcript-message role-tool", dataset: { role: "tool" } },
      h("span", { class: "who" }, "tool"), h("span", { class: `text status-${tool.status}` }, `${tool.name} · ${tool.status}`)));
  }
  return lines;
}

/** Fill `target` (a <section> holding ol.transcript and button.transcript-more) with the first page. */
export function mountTranscript(target, sessionId) {
  const list = target.querySelector("ol.transcript");
  const more = target.querySelector("button.transcript-more");
  const status = target.querySelector(".transcript-status");
  const here = `/sessions/${enc(sessionId)}`;
  let after = 0;
  let shown = 0;
  async function load() {
    more.disabled = true;
    const page = await api(`/api/sessions/${enc(sessionId)}/transcript?after=${after}&runs=${RUNS_PER_PAGE}`);
    for (const run of page.runs) {
      list.append(runSeparator(run, here));
      for (const turn of run.turns) list.append(...turnLines(turn));
      if (run.messages_omitted) list.append(h("li", { class: "muted" }, `${run.messages_omitted} more messages: open the run's replay`));
      if (!run.turns.length) list.append(h("li", { class: "muted" }, "no messages in this run"));
    }
    shown += page.runs.length;
    fill(status, `${shown} of ${page.run_count} run${page.run_count === 1 ? "" : "s"}`);
    after = page.next_after;
    more.hidden = after == null;
    more.disabled = false;
  }
  more.addEventListener("click", () => load().catch(showError));
  return load();
}
