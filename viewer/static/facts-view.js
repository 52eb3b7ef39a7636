// Pure model of one facts row (seed 000, A4): the required-slot triad is built ONLY from
// required_slots_in_state, so slots the caller volunteered never show as filled or missing.

// Missing slots come from the turn's post-transition snapshot, never guessed: a turn that did not
// finish has no snapshot, so its filled and missing lists are null (unknown), not empty.
export function slotTriad(turn) {
  const required = turn.required_slots_in_state ?? [];
  const known = Array.isArray(turn.missing_required_slots);
  const missing = new Set(known ? turn.missing_required_slots : []);
  const written = new Set([
    ...(turn.slot_writes ?? []).map((write) => write.slot),
    ...(turn.unattributed_diffs ?? []).map((diff) => diff.slot),
  ]);
  return {
    filled: known ? required.filter((slot) => !missing.has(slot)) : null,
    written: required.filter((slot) => written.has(slot)),
    missing: known ? required.filter((slot) => missing.has(slot)) : null,
  };
}

export function verdictText(verdict) {
  if (!verdict) return "";
  const reason = verdict.reason ? `: ${verdict.reason}` : "";
  return `${verdict.from ?? "?"} → ${verdict.to ?? "?"}${reason}`;
}

export function clip(text, limit = 140) {
  const value = typeof text === "string" ? text : JSON.stringify(text ?? "");
  return value.length > limit ? `${value.slice(0, limit - 1)}…` : value;
}

// Voice latency (issue 17): only the known keys are read, as numbers; anything else is not shown.
const LATENCY_PARTS = [["endpointing_ms", "endpointing"], ["stt_ms", "stt"], ["llm_ttft_ms", "llm"], ["tts_ttfb_ms", "tts"]];

function ms(value) {
  return typeof value === "number" && Number.isFinite(value) ? `${Math.round(value)} ms` : null;
}

/** "412 ms": user stopped speaking → agent started, "" when the turn's latency has no such figure. */
export function voiceLatencyText(latency) {
  return (latency && typeof latency === "object" && ms(latency.user_to_agent_ms)) || "";
}

/** "412 ms (stt 120, llm 190, tts 60)" for a turn's latency dict, "" when it has none. */
export function latencyText(latency) {
  if (!latency || typeof latency !== "object") return "";
  const parts = LATENCY_PARTS.filter(([key]) => ms(latency[key]) !== null)
    .map(([key, label]) => `${label} ${Math.round(latency[key])}`);
  if (!parts.length) return voiceLatencyText(latency);
  return `${voiceLatencyText(latency) || "? ms"} (${parts.join(", ")})`;
}

export function hasLatency(turns) {
  return (turns ?? []).some((turn) => latencyText(turn.latency) !== "");
}

/** A run's (or a session's) latency summary: "p50 412 ms, p95 980 ms over 3 turns; slow over 1500 ms: 1". */
export function latencySummaryText(summary) {
  const stats = summary?.user_to_agent_ms;
  if (!stats || typeof stats !== "object") return "";
  const slow = Array.isArray(summary.slow_turns) ? summary.slow_turns.length : 0;
  const threshold = ms(summary.slow_threshold_ms);
  return `p50 ${ms(stats.p50) ?? "?"}, p95 ${ms(stats.p95) ?? "?"} over ${stats.count} turn(s)` +
    (threshold ? `; slow over ${threshold}: ${slow}` : "");
}

// Model calls and tokens (issue 16 §3).
function count(value) {
  return Number.isInteger(value) && value >= 0 ? value : null;
}

/** "1840 in / 212 out" for a usage dict (a count nobody reported is "?"), "" when it has none. */
export function usageText(usage) {
  if (!usage || typeof usage !== "object") return "";
  const input = count(usage.input_tokens);
  const output = count(usage.output_tokens);
  if (input === null && output === null) return "";
  return `${input ?? "?"} in / ${output ?? "?"} out`;
}

/** One model call of a turn: "gpt-4o-mini · 120 in / 30 out". */
export function modelCallText(call) {
  const model = typeof call?.model === "string" ? call.model : "model ?";
  const usage = usageText(call?.usage);
  const cost = typeof call?.cost_usd === "number" ? ` · $${call.cost_usd.toFixed(6)}` : "";
  return (usage ? `${model} · ${usage}` : model) + cost;
}

/** "$0.000462 (list prices of 2025-08-15) · no price: local-llm"; "" when no model call counted tokens. */
export function costText(cost) {
  if (!cost || typeof cost !== "object") return "";
  const unpriced = Array.isArray(cost.unpriced_models) ? cost.unpriced_models : [];
  if (cost.usd == null && !unpriced.length) return "";
  const usd = typeof cost.usd === "number" ? `$${cost.usd.toFixed(6)}` : "no price";
  const asOf = typeof cost.prices_as_of === "string" ? ` (list prices of ${cost.prices_as_of})` : "";
  return `${usd}${asOf}${unpriced.length ? ` · no price: ${unpriced.join(", ")}` : ""}`;
}

/** The question a turn asked again with no slots to go by (facts' asked_again). */
export function askedAgainText(again) {
  if (!again || typeof again !== "object") return "";
  return `asked again: “${clip(again.question, 80)}” (turn ${again.earlier_turn_index ?? "?"} asked ` +
    `“${clip(again.earlier_question, 80)}”; the user said “${clip(again.answer, 80)}”)`;
}
