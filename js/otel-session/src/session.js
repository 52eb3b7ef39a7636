/**
 * Session and run ids on a Node app's spans, by otel-session's conventions (docs/conventions.md,
 * "Propagation"; docs/collector.md, "Routing spans to runs").
 *
 *     const provider = new NodeTracerProvider({
 *       spanProcessors: [new SessionSpanProcessor(), new BatchSpanProcessor(exporter)],
 *     });
 *     await withSession('support-4711', async () => { ... streamText(...) ... });
 *
 * `withSession(id, fn)` runs `fn` with `session.id` in the W3C baggage of its context, so it
 * follows async work and, with the baggage propagator, crosses process boundaries.
 * `SessionSpanProcessor` copies it onto every span started there that lacks it, as `session.id`
 * and `gen_ai.conversation.id`: the collector files each trace under the session any of its spans
 * names. The run is the trace: `runIdOf(traceId)` is the run id the collector gives it, and
 * `currentRunId()` that of the active span.
 */

import { context, propagation, trace } from '@opentelemetry/api';

export const SESSION_ID = 'session.id';
export const CONVERSATION_ID = 'gen_ai.conversation.id';

/**
 * Run `fn` with `sessionId` as the session of every span started in it.
 * @template T
 * @param {string} sessionId
 * @param {() => T} fn
 * @returns {T}
 */
export function withSession(sessionId, fn) {
  if (typeof sessionId !== 'string' || sessionId === '') {
    throw new TypeError('otel-session: withSession needs a non-empty session id');
  }
  const active = context.active();
  const bag = (propagation.getBaggage(active) ?? propagation.createBaggage()).setEntry(SESSION_ID, { value: sessionId });
  return context.with(propagation.setBaggage(active, bag), fn);
}

/**
 * The session id of `ctx` (the active context by default), if one was set.
 * @param {import('@opentelemetry/api').Context} [ctx]
 * @returns {string | undefined}
 */
export function currentSessionId(ctx = context.active()) {
  return propagation.getBaggage(ctx)?.getEntry(SESSION_ID)?.value;
}

/**
 * The run id the collector records a trace as: `run-` and the trace id as a UUID.
 * @param {string} traceId 32 hex digits
 * @returns {string}
 */
export function runIdOf(traceId) {
  if (!/^[0-9a-f]{32}$/.test(traceId)) throw new TypeError(`otel-session: not a trace id: ${traceId}`);
  const t = traceId;
  return `run-${t.slice(0, 8)}-${t.slice(8, 12)}-${t.slice(12, 16)}-${t.slice(16, 20)}-${t.slice(20)}`;
}

/**
 * The run id of the active span's trace, if a span is active.
 * @returns {string | undefined}
 */
export function currentRunId() {
  const span = trace.getActiveSpan();
  return span === undefined ? undefined : runIdOf(span.spanContext().traceId);
}

/** Stamps the session id of a span's context onto it as it starts (a span processor). */
export class SessionSpanProcessor {
  /**
   * @param {any} span
   * @param {import('@opentelemetry/api').Context} parentContext
   */
  onStart(span, parentContext) {
    try {
      const sessionId = currentSessionId(parentContext);
      if (!sessionId) return;
      const attributes = span.attributes ?? {};
      if (!(SESSION_ID in attributes)) span.setAttribute(SESSION_ID, sessionId);
      if (!(CONVERSATION_ID in attributes)) span.setAttribute(CONVERSATION_ID, sessionId);
    } catch {
      // never break span creation
    }
  }

  onEnd() {}

  async forceFlush() {}

  async shutdown() {}
}
