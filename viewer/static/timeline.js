// The run's waterfall, as data: turns, messages, model calls and tool executions as spans on one
// time axis (ms since the run's first record), built from the journal in seq order.
//
//   const timeline = buildTimeline(events)
//   timeline.spans: [{key, kind, label, depth, startMs, endMs, startSeq, endSeq, open, error,
//                     ttfdMs, turnIndex, latency, records: [journal records of this span]}]
//   timeline.startMs, timeline.endMs; timeline.atMs(seq) -> ms of the last record with seq <= seq
//
// kind: "turn" | "message" | "model" (an assistant message whose message_finished names a model or
// usage) | "tool". A span without its closing record is `open` and ends at the latest record of any
// span; the axis ends there too (a run_finished written much later does not squash the bars).
// ttfdMs: a streamed message's time from message_started to its first delta (latency to first token).
// latency: a turn's voice latency as its turn_finished recorded it (issue 17), else null.

export function atMs(at) {
  const value = Date.parse(at);
  return Number.isFinite(value) ? value : null;
}

function spanFor(spans, byKey, key, kind, event, base, depth) {
  let span = byKey.get(key);
  if (!span) {
    const ms = (atMs(event.at) ?? base) - base;
    span = { key, kind, label: "", depth, startMs: ms, endMs: ms, startSeq: event.seq, endSeq: event.seq, open: true,
      error: false, ttfdMs: null, latency: null, turnIndex: event.turn_index ?? null, records: [] };
    byKey.set(key, span);
    spans.push(span);
  }
  return span;
}

function close(span, event, base) {
  span.open = false;
  span.endSeq = event.seq;
  span.endMs = Math.max(span.startMs, (atMs(event.at) ?? base) - base);
}

export function buildTimeline(events) {
  const spans = [];
  const byKey = new Map();
  const seqs = [];
  const times = [];
  const base = events.length ? atMs(events[0].at) ?? 0 : 0;
  let lastMs = 0;
  let lastSpanMs = 0;
  for (const event of events) {
    const ms = Math.max(lastMs, (atMs(event.at) ?? base) - base); // backward clocks never run the axis back
    lastMs = ms;
    seqs.push(event.seq);
    times.push(ms);
    const payload = event.payload && typeof event.payload === "object" ? event.payload : {};
    let span = null;
    // A turn_finished with no index and no turn of its own (a framework's state closing a turn that
    // a user message opened) has no bar to close: the turn is the messages', not a "turn ?".
    const turnKey = `turn:${event.turn_index}`;
    const turnRecord = event.type === "turn_started"
      || (event.type === "turn_finished" && (event.turn_index != null || byKey.has(turnKey)));
    if (turnRecord) {
      span = spanFor(spans, byKey, turnKey, "turn", event, base, 0);
      span.records.push(event);
      span.label = `turn ${event.turn_index ?? "?"} · ${payload.state ?? ""}`;
      if (event.type === "turn_finished") {
        close(span, event, base);
        if (payload.interrupted === true) span.error = true;
        if (payload.latency && typeof payload.latency === "object") span.latency = payload.latency;
      }
    } else if (event.message_id && ["message_started", "assistant_delta", "message_finished"].includes(event.type)) {
      span = spanFor(spans, byKey, `m:${event.message_id}`, "message", event, base, 1);
      span.records.push(event);
      if (event.type === "message_started") span.role = payload.role ?? span.role;
      if (event.type === "assistant_delta") {
        span.role = span.role ?? "assistant";
        if (span.ttfdMs === null) span.ttfdMs = ms - span.startMs;
      }
      if (event.type === "message_finished") {
        close(span, event, base);
        if (typeof payload.model === "string" || (payload.usage && typeof payload.usage === "object")) {
          span.kind = "model";
          span.model = typeof payload.model === "string" ? payload.model : null;
          span.usage = payload.usage && typeof payload.usage === "object" ? payload.usage : null;
        }
      }
      span.label = span.kind === "model" ? `model call${span.model ? ` · ${span.model}` : ""}` : `${span.role ?? "message"}`;
    } else if (event.tool_call_id && event.type.startsWith("tool_execution_")) {
      span = spanFor(spans, byKey, `t:${event.tool_call_id}`, "tool", event, base, 1);
      span.records.push(event);
      if (event.type === "tool_execution_started") span.label = `tool · ${payload.name ?? "?"}`;
      if (event.type === "tool_execution_finished") {
        close(span, event, base);
        span.error = payload.status === "error";
      }
    }
    if (span) span.endMs = Math.max(span.endMs, ms);
  }
  for (const span of spans) lastSpanMs = Math.max(lastSpanMs, span.endMs);
  for (const span of spans) {
    if (span.open) span.endMs = lastSpanMs;
    if (!span.label) span.label = span.kind;
  }
  const endMs = spans.length ? lastSpanMs : lastMs;
  return {
    spans,
    startMs: 0,
    endMs,
    /** The axis time of the last record with seq <= `seq` (0 before the first). */
    atMs(seq) {
      let low = 0;
      let high = seqs.length - 1;
      let found = -1;
      while (low <= high) {
        const middle = (low + high) >> 1;
        if (seqs[middle] <= seq) {
          found = middle;
          low = middle + 1;
        } else {
          high = middle - 1;
        }
      }
      return found < 0 ? 0 : Math.min(times[found], endMs);
    },
  };
}

/**
 * A long run's timeline from its per-turn summaries (`…/turns`), not from every record: one "turn"
 * span per turn, the same shape as buildTimeline's. `summary` on each span holds the turn's entry;
 * `records` is empty (the records are read in windows). atMs(seq) interpolates within a turn.
 */
export function buildTurnTimeline(turns) {
  const base = turns.length ? atMs(turns[0].start_at) ?? 0 : 0;
  let lastMs = 0;
  const spans = turns.map((turn) => {
    const startMs = Math.max(lastMs, (atMs(turn.start_at) ?? base) - base);
    const endMs = Math.max(startMs, (atMs(turn.end_at) ?? base) - base);
    lastMs = startMs;
    return { key: `turn:${turn.turn_index}`, kind: "turn", label: `turn ${turn.turn_index ?? "?"} · ${turn.state ?? ""}`,
      depth: 0, startMs, endMs, startSeq: turn.start_seq, endSeq: turn.end_seq, open: turn.open,
      error: turn.interrupted || turn.tool_errors > 0, ttfdMs: null, latency: turn.latency, turnIndex: turn.turn_index,
      records: [], summary: turn };
  });
  const endMs = spans.reduce((most, span) => Math.max(most, span.endMs), 0);
  return {
    spans,
    startMs: 0,
    endMs,
    atMs(seq) {
      let low = 0;
      let high = spans.length - 1;
      let found = -1;
      while (low <= high) {
        const middle = (low + high) >> 1;
        if (spans[middle].startSeq <= seq) {
          found = middle;
          low = middle + 1;
        } else {
          high = middle - 1;
        }
      }
      if (found < 0) return 0;
      const span = spans[found];
      const share = span.endSeq > span.startSeq ? Math.min(1, (seq - span.startSeq) / (span.endSeq - span.startSeq)) : 1;
      return span.startMs + share * (span.endMs - span.startMs);
    },
  };
}

/** The records buildGraph needs, as a long run's turn summaries tell them (turn states and verdicts). */
export function turnGraphEvents(turns) {
  const events = [];
  for (const turn of turns) {
    events.push({ seq: turn.start_seq, type: "turn_started", payload: { state: turn.state_before } });
    if (turn.verdict) events.push({ seq: turn.end_seq, type: "transition_verdict", payload: turn.verdict });
    if (!turn.open) events.push({ seq: turn.end_seq, type: "turn_finished", payload: { state: turn.state } });
  }
  return events;
}
