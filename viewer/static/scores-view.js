// The session page's evaluation scores: the form that adds one (a name, a number, true/false or a
// category, an optional turn and a comment) to the chosen run, and the session's past scores.
import { api, enc, fill, h, jsonForm, showError, timeNode } from "./dom.js";

/** The typed value as JSON sends it: true/false, a number, else the text (a category). */
export function scoreValue(text) {
  const trimmed = text.trim();
  if (trimmed === "true" || trimmed === "false") return trimmed === "true";
  if (trimmed !== "" && Number.isFinite(Number(trimmed))) return Number(trimmed);
  return trimmed;
}

function scoreRow(record) {
  return h("tr", { dataset: { runId: record.run_id, name: record.name } },
    h("td", {}, timeNode(record.at)),
    h("td", {}, h("code", {}, String(record.run_id ?? "").slice(0, 12))),
    h("td", {}, record.turn_index ?? "run"),
    h("td", {}, record.name),
    h("td", {}, String(record.value)),
    h("td", { class: "comment" }, record.comment ?? ""));
}

/** Wire `section` (form#score, table#past-scores, #no-scores); `onSaved` after a score is kept. */
export function mountScores(section, sessionId, runId, onSaved) {
  async function load() {
    const answer = await api(`/api/sessions/${enc(sessionId)}/scores`);
    fill(section.querySelector("#past-scores tbody"), answer.scores.map(scoreRow));
    section.querySelector("#no-scores").hidden = answer.scores.length > 0;
  }
  jsonForm(section.querySelector("form#score"), section.querySelector("#score-result"), `/api/sessions/${enc(sessionId)}/scores`,
    (fields) => ({
      name: String(fields.get("name")).trim(), value: scoreValue(String(fields.get("value"))),
      comment: String(fields.get("comment") ?? ""), ...(runId ? { run_id: runId } : {}),
      ...(String(fields.get("turn_index")).trim() !== "" ? { turn_index: Number(fields.get("turn_index")) } : {}),
    }), () => Promise.all([load(), onSaved()]));
  return load().catch(showError);
}
