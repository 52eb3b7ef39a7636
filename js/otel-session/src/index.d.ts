// Types of otel-session for Node.js (the JavaScript in this folder is the source; no build step).
import type { Context, Span, Tracer } from '@opentelemetry/api';

/** An AI SDK telemetry integration that also records each streamed model call's deltas on its span. */
export function withDeltas<I extends object>(integration: I): I;

/** An openai-node Chat Completions stream inside a GenAI model-call span that records its deltas. */
export function tracedChatStream<Chunk = any>(
  client: { chat: { completions: { create(params: any): PromiseLike<AsyncIterable<Chunk>> } } },
  params: Record<string, unknown>,
  options?: { tracer?: Tracer },
): Promise<AsyncIterable<Chunk>>;

/** What this process recorded, dropped for want of room on a span, and failed to record. */
export function deltaStats(): { streams: number; recorded: number; dropped: number; errors: number };

/** Run `fn` with `sessionId` as the session of every span started in it (W3C baggage `session.id`). */
export function withSession<T>(sessionId: string, fn: () => T): T;

/** The session id of `ctx` (the active context by default), if one was set. */
export function currentSessionId(ctx?: Context): string | undefined;

/** The run id the collector records a trace as (`run-` and the trace id as a UUID). */
export function runIdOf(traceId: string): string;

/** The run id of the active span's trace, if a span is active. */
export function currentRunId(): string | undefined;

/** Copies the session id of a span's context onto it as `session.id` and `gen_ai.conversation.id`. */
export class SessionSpanProcessor {
  onStart(span: Span, parentContext: Context): void;
  onEnd(span: unknown): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
}
