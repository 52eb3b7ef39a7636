/**
 * otel-session for Node.js: what the OpenTelemetry spans of a Node app need so that
 * `otel-session collect` records its conversations with their streamed deltas (docs/nodejs.md).
 *
 * - `withDeltas(new OpenTelemetry())`: the Vercel AI SDK's streamed model calls, chunk by chunk.
 * - `tracedChatStream(client, params)`: an openai-node Chat Completions stream in a model-call
 *   span, chunk by chunk.
 * - `withSession(id, fn)` and `SessionSpanProcessor`: the session of every span; `runIdOf`,
 *   `currentRunId`: the run (the trace) the collector records.
 * - `deltaStats()`: what was recorded, dropped, and failed (never thrown into the app).
 */

export { withDeltas } from './ai-sdk.js';
export { deltaStats } from './deltas.js';
export { tracedChatStream } from './openai.js';
export { SessionSpanProcessor, currentRunId, currentSessionId, runIdOf, withSession } from './session.js';
