// The fleet dashboard (GET /api/dashboard, one catalog query): totals, four charts drawn by the
// vendored Chart.js (window.Chart, no CDN), and a table by model. Every figure links to the runs
// behind it: the home list with the same range and filters (and the problem, for a share).
import { api, fill, h, markReady, showError } from "./dom.js";

const query = new URLSearchParams(location.search);
const FILTERS = ["agent", "service", "eval_id", "kind"];
const SHARES = [
  ["repeated_ask", "repeated ask"], ["blocked_guard", "blocked guard"],
  ["tool_error", "tool error"], ["integrity_failed", "failed integrity"],
];
const charts = [];
let shown = null; // the last answer, drawn again when the theme changes

// A theme colour as the canvas needs it: the variables hold light-dark() pairs, resolved by the
// browser only where a colour is used, so a hidden probe element uses it.
const probe = document.createElement("span");
probe.hidden = true;
document.body.append(probe);
function css(name) {
  probe.style.color = `var(${name})`;
  return getComputedStyle(probe).color;
}
const pad = (value) => String(value).padStart(2, "0");

/** A datetime-local value (the viewer's zone) as the UTC prefix the API takes, and back. */
function toUtc(local) {
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? "" : date.toISOString().slice(0, 16);
}
function toLocal(utc) {
  const date = new Date(`${utc}${utc.length <= 16 ? "Z" : ""}`);
  if (Number.isNaN(date.getTime())) return "";
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** The UTC end of a bucket that starts at `start` ("2026-12-02" or "2026-12-02T13"). */
function bucketEnd(start, bucket) {
  const date = new Date(bucket === "hour" ? `${start}:00Z` : `${start}T00:00Z`);
  date.setUTCHours(date.getUTCHours() + (bucket === "hour" ? 1 : 24));
  return date.toISOString().slice(0, 16);
}

/** The home list of the runs behind a figure: the range (or one bucket), the filters, a problem. */
function runsHref({ since, until, problem, score } = {}) {
  const params = new URLSearchParams();
  for (const name of FILTERS) if (query.get(name)) params.set(name, query.get(name));
  if (since) params.set("since", since);
  if (until) params.set("until", until);
  if (problem) params.set("problem", problem);
  if (score) params.set("score", score);
  return `/?${params}`;
}

const money = (usd) => (typeof usd === "number" ? `$${usd.toFixed(usd >= 1 ? 2 : 6)}` : "no price");
const percent = (part, whole) => (whole ? `${Math.round((100 * part) / whole)}%` : "–");

function card(label, value, href, detail = "") {
  return h("a", { class: "card", href }, h("span", { class: "card-value" }, value), h("span", { class: "card-label" }, label),
    detail ? h("span", { class: "card-detail muted" }, detail) : "");
}

function renderTotals(answer) {
  const totals = answer.totals;
  const range = { since: answer.since, until: answer.until };
  const unpriced = totals.unpriced_models.length ? `no price: ${totals.unpriced_models.join(", ")}` : "";
  fill(document.getElementById("totals"),
    card("sessions", totals.sessions, runsHref(range)),
    card("runs", totals.runs, runsHref(range)),
    ...SHARES.map(([key, label]) => card(label, percent(totals[key], totals.runs), runsHref({ ...range, problem: key }),
      `${totals[key]} run(s)`)),
    card("turn time p50 / p95", totals.turn_p50_ms == null ? "–"
      : `${Math.round(totals.turn_p50_ms)} / ${Math.round(totals.turn_p95_ms ?? totals.turn_p50_ms)} ms`, runsHref(range)),
    card("cost", money(totals.cost_usd), runsHref(range), unpriced));
}

function chart(id, type, labels, datasets, options = {}, onPick = null) {
  const grid = css("--line");
  const text = css("--muted");
  const made = new window.Chart(document.getElementById(id), {
    type,
    data: { labels, datasets },
    options: {
      responsive: true, maintainAspectRatio: false, animation: false,
      interaction: { mode: "index", intersect: false },
      plugins: { legend: { labels: { color: text } } },
      scales: {
        x: { ticks: { color: text }, grid: { color: grid } },
        y: { ticks: { color: text }, grid: { color: grid }, beginAtZero: true },
        ...options.scales,
      },
      onClick: (_event, elements) => { if (onPick && elements.length) onPick(elements[0]); },
      onHover: (event, elements) => { event.native.target.style.cursor = elements.length ? "pointer" : "default"; },
    },
  });
  charts.push(made);
  return made;
}

function renderCharts(answer) {
  for (const made of charts.splice(0)) made.destroy();
  const buckets = answer.buckets;
  const labels = buckets.map((bucket) => (answer.bucket === "hour" // an hour in the viewer's zone; a day is a UTC day
    ? toLocal(`${bucket.start}:00`).replace("T", " ") : `${bucket.start} (UTC day)`));
  const open = (index, problem) => {
    const start = buckets[index].start;
    location.href = runsHref({ since: start, until: bucketEnd(start, answer.bucket), problem });
  };
  const colors = [css("--accent"), css("--ok"), css("--warn"), css("--err"), css("--edge")];
  chart("chart-volume", "bar", labels, [
    { label: "sessions", data: buckets.map((b) => b.sessions), backgroundColor: colors[4] },
    { label: "runs", data: buckets.map((b) => b.runs), backgroundColor: colors[0] },
  ], {}, (element) => open(element.index));
  chart("chart-problems", "line", labels, SHARES.map(([key, label], position) => ({
    label, data: buckets.map((b) => (b.runs ? (100 * b[key]) / b.runs : 0)), borderColor: colors[position % 4 + 1],
    backgroundColor: colors[position % 4 + 1], dataKey: key,
  })), { scales: { y: { min: 0, max: 100, ticks: { color: css("--muted"), callback: (value) => `${value}%` }, grid: { color: css("--line") } } } },
  (element) => open(element.index, SHARES[element.datasetIndex][0]));
  chart("chart-latency", "line", labels, [
    { label: "p50 ms", data: buckets.map((b) => b.turn_p50_ms), borderColor: colors[0], backgroundColor: colors[0], spanGaps: true },
    { label: "p95 ms", data: buckets.map((b) => b.turn_p95_ms), borderColor: colors[3], backgroundColor: colors[3], spanGaps: true },
  ], {}, (element) => open(element.index));
  chart("chart-tokens", "bar", labels, [
    { label: "input tokens", data: buckets.map((b) => b.input_tokens), backgroundColor: colors[0], stack: "tokens" },
    { label: "output tokens", data: buckets.map((b) => b.output_tokens), backgroundColor: colors[1], stack: "tokens" },
    { label: "cost (USD)", data: buckets.map((b) => b.cost_usd), type: "line", yAxisID: "cost", borderColor: colors[2],
      backgroundColor: colors[2] },
  ], { scales: { cost: { position: "right", beginAtZero: true, ticks: { color: css("--muted") }, grid: { display: false } } } },
  (element) => open(element.index));
  const names = Object.keys(answer.totals.scores ?? {}); // a score's mean over time: one line per name
  document.getElementById("scores-figure").hidden = names.length === 0;
  if (names.length) {
    chart("chart-scores", "line", labels, names.map((name, position) => ({
      label: name, data: buckets.map((b) => b.scores?.[name] ?? null), spanGaps: true,
      borderColor: colors[position % colors.length], backgroundColor: colors[position % colors.length],
    })), {}, (element) => {
      const start = buckets[element.index].start;
      location.href = runsHref({ since: start, until: bucketEnd(start, answer.bucket), score: names[element.datasetIndex] });
    });
  }
}

function renderModels(answer) {
  fill(document.querySelector("#models tbody"), answer.models.map((model) => h("tr", { dataset: { model: model.model } },
    h("td", {}, model.model), h("td", { class: "num" }, model.calls), h("td", { class: "num" }, model.input_tokens),
    h("td", { class: "num" }, model.output_tokens),
    h("td", { class: `num${model.cost_usd == null ? " muted" : ""}` }, money(model.cost_usd)))));
  document.getElementById("prices-note").textContent = answer.totals.prices_as_of
    ? `Cost at list prices of ${answer.totals.prices_as_of} ($OTEL_SESSION_PRICES overrides them); a model with no price is never counted as $0.`
    : "";
}

function fillForm() {
  const form = document.getElementById("filters");
  for (const element of form.elements) {
    if (!element.name) continue;
    const value = query.get(element.name) ?? "";
    element.value = element.type === "datetime-local" && value ? toLocal(value) : value || (element.tagName === "SELECT" ? "auto" : "");
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const element of form.elements) {
      if (!element.name || !element.value || element.value === "auto") continue;
      next.set(element.name, element.type === "datetime-local" ? toUtc(element.value) : element.value);
    }
    location.search = next.toString();
  });
}

async function load() {
  fillForm();
  const answer = await api(`/api/dashboard?${query}`);
  const warning = document.getElementById("dashboard-warning");
  warning.hidden = !answer.warning;
  warning.textContent = answer.warning ?? "";
  document.getElementById("dashboard-empty").hidden = answer.totals.runs > 0;
  document.body.dataset.bucket = answer.bucket;
  shown = answer;
  const form = document.getElementById("filters");
  for (const name of ["since", "until"]) { // the range the answer covers, when the URL left it to the default
    if (!query.get(name) && answer[name]) form.elements[name].value = toLocal(answer[name]);
  }
  renderTotals(answer);
  renderCharts(answer);
  renderModels(answer);
}

// The charts take their colours from the theme's variables: drawn again when it changes.
const redraw = () => { if (shown) renderCharts(shown); };
window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", redraw);
new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
load().then(markReady, showError);
