// Small, pure text helpers for a run's listing fields (sessions list and session page).

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
