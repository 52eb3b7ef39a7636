// Small DOM and fetch helpers shared by the pages. Text only ever goes in as text nodes:
// nothing in the viewer assigns innerHTML, so journal strings can never become markup.

/** Build an element: h("td", {class: "x", title: "y"}, "text", childNode, [more]). */
export function h(tag, attrs = {}, ...children) {
  return build(document.createElement(tag), attrs, children);
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Build an SVG element the same way: svg("rect", {x: 1, class: "bar"}). */
export function svg(tag, attrs = {}, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(element, attrs, children) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "dataset") Object.assign(element.dataset, value);
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else if (child instanceof Node) element.append(child);
    else element.append(document.createTextNode(String(child)));
  }
}

/** Replace the children of `element` (text-safe). */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** GET (or send) JSON from the viewer API; errors become ApiError with the server's code. */
export async function api(path, init = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...init });
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, body?.error ?? "http_error", body?.message ?? response.statusText);
  }
  return body;
}

export const enc = encodeURIComponent;

export function runPath(sessionId, runId) {
  return `/api/sessions/${enc(sessionId)}/runs/${enc(runId)}`;
}

export function showError(error) {
  const target = document.getElementById("error");
  if (!target) return;
  target.hidden = false;
  target.textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error?.message ?? error);
}

export const READY_MARK = "otel-session:ready";

/** The page has rendered its data: `body[data-ready]` for tests, a performance mark for bench/viewer.py. */
export function markReady() {
  if (document.body.dataset.ready !== "true") performance.mark(READY_MARK);
  document.body.dataset.ready = "true";
}

export function clearError() {
  const target = document.getElementById("error");
  if (!target) return;
  target.hidden = true;
  target.textContent = "";
}

export function badge(text, kind = text) {
  return h("span", { class: `badge status-${kind ?? "none"}` }, text ?? "none");
}

export function shortTime(at) {
  return typeof at === "string" ? at.replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}

const pad = (value) => String(value).padStart(2, "0");

/** A journal timestamp in the viewer's local time zone ("2026-11-29 23:52:01"), UTC on hover. */
export function timeNode(at) {
  if (typeof at !== "string") return "";
  const date = new Date(at);
  if (Number.isNaN(date.getTime())) return shortTime(at);
  const local = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  return h("time", { datetime: at, title: `${shortTime(at)} (UTC)` }, local);
}

/** An id on one line, ellipsized when long, whole on hover, copied on click (theme.js). */
export function idNode(id, shown = id) {
  const text = String(id ?? "");
  return h("code", { class: "id", title: `${text} · click to copy`, "data-copy": text }, String(shown ?? ""));
}

/** Send `form` as JSON (`bodyOf(FormData)`) to `url`, once per deliberate submit: the button is off
 * while a request is in flight and after a save, until the form is edited again; a saved form is
 * cleared, `output` says where it went, then `onSaved()`. */
export function jsonForm(form, output, url, bodyOf, onSaved) {
  const submit = form.querySelector("button[type=submit]");
  form.addEventListener("input", () => { submit.disabled = false; });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (submit.disabled) return;
    submit.disabled = true;
    try {
      const answer = await api(url, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(bodyOf(new FormData(form))),
      });
      form.reset();
      output.textContent = `Saved for ${answer.run_id}${answer.fallback_to_latest_run ? " (the latest run)" : ""}.`;
      await onSaved();
    } catch (error) {
      submit.disabled = false;
      output.textContent = `Not saved: ${error.message}`;
    }
  });
}
