// Sessions page: every live session, newest first, with its runs; filter by session or run id.
import { api, badge, enc, fill, h, shortTime, showError } from "./dom.js";

const body = document.querySelector("#sessions tbody");
const search = document.getElementById("search");
let sessions = [];

function rows(session) {
  return session.runs.map((run, index) =>
    h("tr", { class: index === 0 ? "session-first" : "", dataset: { sessionId: session.session_id, runId: run.run_id } },
      h("td", {}, index === 0 ? h("a", { href: `/sessions/${enc(session.session_id)}` }, session.session_id) : ""),
      h("td", {}, h("a", { href: `/sessions/${enc(session.session_id)}/runs/${enc(run.run_id)}` }, h("code", {}, run.run_id))),
      h("td", {}, run.kind),
      h("td", {}, shortTime(run.created_at)),
      h("td", { class: "turns" }, run.turns),
      h("td", {}, run.event_count),
      h("td", {}, badge(run.capture_status ?? "missing", run.capture_status ?? "invalid")),
      h("td", {}, badge(run.integrity, run.integrity)),
    ));
}

function render() {
  const needle = search.value.trim().toLowerCase();
  const shown = sessions.filter((session) =>
    !needle || session.session_id.toLowerCase().includes(needle) ||
    session.runs.some((run) => run.run_id.includes(needle)));
  fill(body, shown.map(rows));
  document.getElementById("count").textContent = `${shown.length} of ${sessions.length} sessions`;
  document.getElementById("empty").hidden = sessions.length > 0;
}

search.addEventListener("input", render);
search.value = new URLSearchParams(location.search).get("q") ?? "";
api("/api/sessions").then((answer) => {
  sessions = answer.sessions;
  render();
  document.body.dataset.ready = "true";
}, showError);
