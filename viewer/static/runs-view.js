// Small helpers for a run's listing fields (sessions list and session page).
import { h } from "./dom.js";

const CAPTURE_TEXT = { recording: "recording", failed: "capture failed", invalid: "invalid bundle" };

/** The run's capture and integrity in one cell: nothing when the capture is complete and the
 * bundle checks out (every run, normally); else a badge, the detail on hover. */
export function captureNode(run) {
  const capture = run.capture_status ?? "missing";
  const integrity = run.integrity ?? "invalid";
  const diagnostics = run.diagnostics ?? [];
  const detail = `capture: ${capture} · integrity: ${integrity}${diagnostics.length ? ` · ${diagnostics.join(", ")}` : ""}`;
  if (capture === "complete" && integrity === "complete") {
    return diagnostics.length ? h("span", { class: "badge status-warning", title: detail }, "warnings") : "";
  }
  const kind = integrity === "invalid" || capture === "missing" ? "invalid" : integrity === "complete" ? capture : integrity;
  return h("span", { class: `badge status-${kind}`, title: detail }, CAPTURE_TEXT[kind] ?? kind);
}

export function kindText(run) {
  return run.kind === "eval" && run.eval_id ? `eval · ${run.eval_id}` : run.kind;
}

export function feedbackText(feedback) {
  return feedback ? `${feedback.mean} (${feedback.count})` : "–";
}

export function tokensText(run) {
  if (run.input_tokens == null && run.output_tokens == null) return "–";
  return `${run.input_tokens ?? "?"} in / ${run.output_tokens ?? "?"} out`;
}

export function durationText(ms) {
  if (ms == null) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** The run's tags and metadata as chips; `pick(name, value)` (a filter) when one is clicked. */
export function labelsNode(run, pick) {
  const chip = (text, whole, name, value) => h(pick ? "button" : "span", { type: pick ? "button" : undefined,
    class: `chip chip-${name.startsWith("meta.") ? "meta" : "tag"}`, title: pick ? `${whole} · click for the runs with it` : whole,
    onclick: pick ? () => pick(name, value) : undefined }, text);
  const tags = (run.tags ?? []).map((tag) => chip(tag, `tag ${tag}`, "tag", tag));
  const metadata = Object.entries(run.metadata ?? {}).map(([key, value]) => // a dotted key by its last part
    chip(`${key.split(".").pop()}=${value}`, `${key}=${value}`, `meta.${key}`, value));
  return tags.length || metadata.length ? h("span", { class: "chips" }, tags, metadata) : "–";
}

/** The run's evaluation scores: "name 0.75 (4)" for numbers and booleans (the mean), "name: last" for
 * categories; `pick(name)` (a filter) when one is clicked. */
export function scoresNode(run, pick) {
  const scores = Object.entries(run.scores ?? {}).map(([name, score]) => h(pick ? "button" : "span", {
    type: pick ? "button" : undefined, class: "chip chip-score", dataset: { score: name },
    title: `${name}: last ${score.last}, ${score.count} score${score.count === 1 ? "" : "s"}${score.mean != null ? `, mean ${score.mean}` : ""}`,
    onclick: pick ? () => pick(name) : undefined,
  }, score.mean != null ? `${name} ${score.mean} (${score.count})` : `${name}: ${score.last}`));
  return scores.length ? h("span", { class: "chips" }, scores) : "–";
}
