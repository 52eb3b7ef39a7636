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
