// The session page's evaluation scores: the form that adds one (a name, a number, true/false or a
// category, an optional turn and a comment) to the chosen run, and the session's past scores.
import { api, enc, fill, h, showError, timeNode } from "./dom.js";

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
  const form = section.querySelector("form#score");
  const submit = form.querySelector("button[type=submit]");
  const output = section.querySelector("#score-result");
  async function load() {
    const answer = await api(`/api/sessions/${enc(sessionId)}/scores`);
    fill(section.querySelector("#past-scores tbody"), answer.scores.map(scoreRow));
    section.querySelector("#no-scores").hidden = answer.scores.length > 0;
  }
  form.addEventListener("input", () => { submit.disabled = false; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (submit.disabled) return;
    submit.disabled = true;
    const fields = new FormData(form);
    const body = { name: String(fields.get("name")).trim(), value: scoreValue(String(fields.get("value"))),
      comment: String(fields.get("comment") ?? "") };
    if (String(fields.get("turn_index")).trim() !== "") body.turn_index = Number(fields.get("turn_index"));
    if (runId) body.run_id = runId;
    try {
      const answer = await api(`/api/sessions/${enc(sessionId)}/scores`, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
      });
      form.reset();
      output.textContent = `Saved for ${answer.run_id}${answer.fallback_to_latest_run ? " (the latest run)" : ""}.`;
      await Promise.all([load(), onSaved()]);
    } catch (error) {
      submit.disabled = false;
      output.textContent = `Not saved: ${error.message}`;
    }
  });
  return load().catch(showError);
}
