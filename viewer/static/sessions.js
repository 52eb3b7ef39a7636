// Sessions list: every run, live and eval (under its eval id), as the server filters, sorts and
// pages it (GET /api/runs: one catalog query a page). The query lives in the URL, so a filtered view
// can be shared; pages follow the answer's keyset cursor (stable while runs arrive), and the cursors
// of the pages before this one are kept here for "Newer".
import { api, badge, enc, fill, h, markReady, showError, timeNode } from "./dom.js";
import { captureNode, durationText, feedbackText, kindText, labelsNode, scoresNode, tokensText } from "./runs-view.js";

const PAGE = 50;
const TYPING_MS = 200;
const FILTERS = ["q", "status", "kind", "eval_id", "agent", "service", "since", "until", "tag", "meta", "score"];
const TYPED = ["q", "tag", "meta", "score"]; // applied once typing pauses
const PREFIXED = { meta: "meta.", score: "score." }; // form "KEY=VALUE" <-> URL "meta.KEY=VALUE"
const FACETS = { agent: "agent", service: "service", eval_id: "eval_id" };

const form = document.getElementById("filters");
const body = document.querySelector("#sessions tbody");
const query = new URLSearchParams(location.search);
query.delete("offset"); // links made before cursors: their page starts again at the first
let typing = null;
let request = 0;
let nextCursor = null;
const before = []; // the cursors of the pages before this one, the first page's as ""
const picked = []; // up to two "<session_id>/<run_id>" to compare

function renderPicks() {
  const link = document.getElementById("compare-link");
  link.hidden = picked.length !== 2;
  if (picked.length === 2) link.href = `/compare?left=${enc(picked[0])}&right=${enc(picked[1])}`;
  document.getElementById("compare-hint").hidden = picked.length === 2;
  for (const box of body.querySelectorAll("input.pick")) box.checked = picked.includes(box.value);
}

function togglePick(value) {
  const at = picked.indexOf(value);
  if (at >= 0) picked.splice(at, 1);
  else {
    picked.push(value);
    if (picked.length > 2) picked.shift();
  }
  renderPicks();
}

function row(run) {
  const session = `/sessions/${enc(run.session_id)}`;
  const pick = `${run.session_id}/${run.run_id}`;
  return h("tr", { class: `status-row-${run.status}`, dataset: { sessionId: run.session_id, runId: run.run_id, status: run.status } },
    h("td", {}, h("input", { type: "checkbox", class: "pick", value: pick, "aria-label": `compare ${run.run_id}`,
      onchange: () => togglePick(pick) })),
    h("td", {}, h("a", { href: session }, run.session_id)),
    h("td", {}, h("a", { href: `${session}/runs/${enc(run.run_id)}` }, h("code", {}, run.run_id.slice(0, 12)))),
    h("td", {}, kindText(run)),
    h("td", {}, run.agent ?? "–"),
    h("td", {}, run.service ?? "–"),
    h("td", { title: run.problems.map((problem) => problem.message).join("\n") }, badge(run.status, run.status),
      run.problem_count ? h("span", { class: "has-problems" }, ` ${run.problem_count}`) : ""),
    h("td", {}, timeNode(run.created_at)),
    h("td", { class: "num" }, durationText(run.duration_ms)),
    h("td", { class: "num turns" }, run.turns),
    h("td", { class: "num" }, run.model_calls),
    h("td", { class: "num" }, tokensText(run)),
    h("td", { class: "num" }, feedbackText(run.feedback)),
    h("td", { class: "capture" }, captureNode(run)),
    h("td", { class: "labels" }, labelsNode(run, (name, value) =>
      (name === "tag" ? setFilter("tag", value) : setFilter("meta", `${name.slice(5)}=${value}`)))),
    h("td", { class: "scores" }, scoresNode(run, (name) => setFilter("score", name))),
  );
}

function fillFacets(facets) {
  for (const [name, facet] of Object.entries(FACETS)) {
    const select = form.elements[name];
    const chosen = query.get(name) ?? "";
    const values = new Set(facets[facet] ?? []);
    if (chosen) values.add(chosen);
    fill(select, h("option", { value: "" }, "any"), [...values].sort().map((value) => h("option", { value }, value)));
    select.value = chosen;
  }
}

function renderSortMarks() {
  const sort = query.get("sort") ?? "created_at";
  const order = query.get("order") ?? "desc";
  for (const header of document.querySelectorAll("th[data-sort]")) {
    header.dataset.active = String(header.dataset.sort === sort);
    header.setAttribute("aria-sort", header.dataset.sort === sort ? (order === "asc" ? "ascending" : "descending") : "none");
  }
}

async function load() {
  const mine = ++request;
  const params = new URLSearchParams(query);
  params.set("limit", String(PAGE));
  const answer = await api(`/api/runs?${params}`);
  if (mine !== request) return; // a newer query was sent meanwhile
  fill(body, answer.runs.map(row));
  renderPicks();
  fillFacets(answer.facets);
  renderSortMarks();
  nextCursor = answer.next_cursor;
  const known = !query.get("cursor") || before.length > 0; // a shared link to a later page: its position is unknown
  const from = before.length * PAGE + 1;
  // Past 10,000 runs the total is a lower bound (total_exact false): "of 10,000+ runs".
  const total = answer.total_exact === false ? `${answer.total.toLocaleString("en")}+` : String(answer.total);
  document.getElementById("count").textContent = !answer.total ? "0 runs"
    : known ? `${from}–${from + answer.runs.length - 1} of ${total} runs` : `${answer.runs.length} of ${total} runs`;
  document.getElementById("prev-page").disabled = !query.get("cursor");
  document.getElementById("next-page").disabled = !nextCursor;
  document.getElementById("empty").hidden = answer.total > 0;
  markReady();
  document.body.dataset.total = String(answer.total);
}

/** The URL's `meta.KEY=VALUE` (or `score=NAME`, `score.NAME=VALUE`) as the form's "KEY=VALUE" (the first one). */
function prefixedOfQuery(field) {
  if (field === "score" && query.get("score")) return query.get("score");
  for (const [name, value] of query) if (name.startsWith(PREFIXED[field])) return `${name.slice(PREFIXED[field].length)}=${value}`;
  return "";
}

/** The form's "KEY=VALUE" into the URL (a score's "NAME" alone: runs with that score). */
function setPrefixed(field, text) {
  for (const name of [...query.keys()]) if (name.startsWith(PREFIXED[field]) || name === field) query.delete(name);
  const at = text.indexOf("=");
  if (at > 0) query.set(`${PREFIXED[field]}${text.slice(0, at).trim()}`, text.slice(at + 1).trim());
  else if (field === "score" && text.trim()) query.set("score", text.trim());
}

/** One filter from a clicked chip: the form shows it, the list applies it. */
function setFilter(field, text) {
  form.elements[field].value = text;
  update({ [field]: text });
}

function update(changes) {
  if (!("cursor" in changes)) { // a new filter or order starts again at the first page
    before.length = 0;
    query.delete("cursor");
  }
  for (const [name, value] of Object.entries(changes)) {
    if (name in PREFIXED) setPrefixed(name, value ?? "");
    else if (value === "" || value == null) query.delete(name);
    else query.set(name, value);
  }
  const search = query.toString();
  history.replaceState(null, "", search ? `?${search}` : location.pathname);
  load().catch(showError);
}

function fromForm(name) {
  const value = form.elements[name].value;
  return (name === "since" || name === "until") && value ? `${value.length === 16 ? `${value}:00` : value}` : value;
}

for (const name of FILTERS) {
  const field = form.elements[name];
  const value = query.get(name) ?? "";
  field.value = name in PREFIXED ? prefixedOfQuery(name) : (name === "since" || name === "until") ? value.replace(/Z$/, "") : value;
}
form.addEventListener("input", (event) => {
  const name = event.target.name;
  if (!FILTERS.includes(name)) return;
  clearTimeout(typing);
  // Every filter as the form shows it: a filter changed while a search is still being typed
  // (its timer cancelled here) applies the search too, never the URL's older one.
  const apply = () => update(Object.fromEntries(FILTERS.map((filter) => [filter, fromForm(filter)])));
  if (TYPED.includes(name)) typing = setTimeout(apply, TYPING_MS);
  else apply();
});
form.addEventListener("submit", (event) => event.preventDefault());
form.addEventListener("reset", () => {
  clearTimeout(typing);
  update(Object.fromEntries(FILTERS.map((name) => [name, ""])));
});
for (const header of document.querySelectorAll("th[data-sort]")) {
  header.tabIndex = 0;
  const sortBy = () => {
    const same = (query.get("sort") ?? "created_at") === header.dataset.sort;
    const order = same && (query.get("order") ?? "desc") === "desc" ? "asc" : "desc";
    update({ sort: header.dataset.sort, order });
  };
  header.addEventListener("click", sortBy);
  header.addEventListener("keydown", (event) => { if (event.key === "Enter") sortBy(); });
}
document.getElementById("prev-page").addEventListener("click", () => update({ cursor: before.pop() ?? "" }));
document.getElementById("next-page").addEventListener("click", () => {
  before.push(query.get("cursor") ?? "");
  update({ cursor: nextCursor });
});

load().catch(showError);
