/**
 * Deltas for the Vercel AI SDK (`ai` 7 with `@ai-sdk/otel`): each streamed model call's chunks
 * as `otel_session.delta` events on its `chat {model}` span.
 *
 *     import { OpenTelemetry } from '@ai-sdk/otel';
 *     import { registerTelemetry } from 'ai';
 *     import { withDeltas } from 'otel-session';
 *
 *     registerTelemetry(withDeltas(new OpenTelemetry()));
 *
 * `withDeltas(integration)` gives the integration back with its `executeLanguageModelCall`
 * wrapped: the provider's `doStream` runs in the model-call span's context (the integration puts
 * it there), so the span current there is the one that will hold the reply, and the stream the
 * call returns is passed through a tap that reads its parts (`text-delta`, `reasoning-delta`,
 * `tool-input-start`/`-delta`/`-end`, `tool-call`) on their way to the SDK. Calls that do not
 * stream (`generateText`) are left alone, and so is a call whose current span is no GenAI
 * model-call span (`LegacyOpenTelemetry`'s `ai.*` spans). Every other method is the integration's
 * own. A failure of the tap is counted and the app's stream reads as it would untapped.
 */

import { trace } from '@opentelemetry/api';

import { DeltaRecorder, swallowed } from './deltas.js';

/**
 * Feed one stream part of the AI SDK's language model protocol to `deltas`.
 * @param {DeltaRecorder} deltas
 * @param {any} part
 */
function feed(deltas, part) {
  switch (part?.type) {
    case 'text-delta':
      deltas.piece(`text:${part.id}`, 'text', part.delta);
      break;
    case 'reasoning-delta':
      deltas.piece(`reasoning:${part.id}`, 'thinking', part.delta);
      break;
    case 'tool-input-start':
      deltas.openCall(`tool:${part.id}`, part.id, part.toolName);
      break;
    case 'tool-input-delta':
      deltas.piece(`tool:${part.id}`, 'tool_call', part.delta);
      break;
    case 'tool-input-end':
      deltas.closeCall(`tool:${part.id}`);
      break;
    case 'tool-call': {
      const key = `tool:${part.toolCallId}`;
      if (deltas.blocks.has(key)) break; // streamed already, input part by part
      deltas.openCall(key, part.toolCallId, part.toolName);
      deltas.piece(key, 'tool_call', part.input);
      deltas.closeCall(key);
      break;
    }
    case 'finish':
    case 'error':
      deltas.close();
      break;
    default:
  }
}

/**
 * `stream` passed through a tap that records its parts on `deltas`. A pull source rather than a
 * `TransformStream`: its `cancel` runs on every Node the package supports when the reader gives
 * up early (a transformer's `cancel` needs Node 21), so the recorder is closed and the drops said
 * on the span however the stream ends.
 * @param {ReadableStream<any>} stream
 * @param {DeltaRecorder} deltas
 */
function tapped(stream, deltas) {
  const reader = stream.getReader();
  return new ReadableStream({
    async pull(controller) {
      let step;
      try {
        step = await reader.read();
      } catch (error) {
        deltas.close();
        throw error;
      }
      if (step.done) {
        deltas.close();
        controller.close();
        return;
      }
      try {
        feed(deltas, step.value);
      } catch (error) {
        swallowed(error);
      }
      controller.enqueue(step.value);
    },
    cancel(reason) {
      deltas.close();
      return reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * The result of a provider call, its stream tapped when it streams on a model-call span.
 * @template T
 * @param {T} result
 * @param {any} span
 * @returns {T}
 */
function withTappedStream(result, span) {
  try {
    const stream = /** @type {any} */ (result)?.stream;
    if (!(stream instanceof ReadableStream)) return result;
    const deltas = DeltaRecorder.on(span);
    if (deltas === null) return result;
    return { ...result, stream: tapped(stream, deltas) };
  } catch (error) {
    swallowed(error);
    return result;
  }
}

/**
 * An AI SDK telemetry integration (such as `new OpenTelemetry()` of `@ai-sdk/otel`) that also
 * records the deltas of every streamed model call on the call's span.
 * @template {object} I
 * @param {I} integration
 * @returns {I}
 */
export function withDeltas(integration) {
  const own = /** @type {any} */ (integration).executeLanguageModelCall;
  /** @param {{execute: () => PromiseLike<any>}} options */
  const executeLanguageModelCall = (options) => {
    const execute = async () => {
      const span = trace.getActiveSpan();
      return withTappedStream(await options.execute(), span);
    };
    return typeof own === 'function' ? own.call(integration, { ...options, execute }) : execute();
  };
  return new Proxy(integration, {
    get(target, key) {
      if (key === 'executeLanguageModelCall') return executeLanguageModelCall;
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
