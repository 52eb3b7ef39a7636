/**
 * openai-node's streamed Chat Completions in a GenAI model-call span, with their deltas.
 *
 *     import OpenAI from 'openai';
 *     import { tracedChatStream } from 'otel-session';
 *
 *     const client = new OpenAI();
 *     for await (const chunk of await tracedChatStream(client, { model, messages })) { ... }
 *
 * No OpenTelemetry instrumentation traces openai-node 7 (`@opentelemetry/instrumentation-openai`
 * takes `openai` below 7), so `tracedChatStream(client, params, { tracer })` makes the span
 * itself: `chat {model}` (span kind CLIENT) with the GenAI attributes the collector reads
 * (`gen_ai.operation.name` `chat`, `gen_ai.provider.name` `openai`, `gen_ai.request.model`,
 * `gen_ai.input.messages`; at the end `gen_ai.output.messages`, `gen_ai.response.model`,
 * `gen_ai.response.id`, `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` /
 * `output_tokens` when the stream reports usage). It calls
 * `client.chat.completions.create({ ...params, stream: true })` inside that span and returns the
 * chunks as an async iterable: each choice's `content` (text), `reasoning_content` (thinking) and
 * tool-call arguments become `otel_session.delta` events of the output message at the choice's
 * index. The span ends when the stream ends, fails, or is left early. A failing request ends the
 * span with its error and throws as the client does.
 */

import { SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api';

import { DeltaRecorder, swallowed } from './deltas.js';

const TRACER_NAME = 'otel-session.openai';

/**
 * Now, in epoch milliseconds to the microsecond: the span's start, events and end are given this
 * clock's times. The SDK stamps an unstated start in whole milliseconds (Date.now()), which
 * could put a call's start before the end of the call just before it.
 */
function now() {
  return performance.timeOrigin + performance.now();
}

/**
 * An OpenAI Chat Completions message as GenAI parts (`{role, parts: [...]}`).
 * @param {any} message
 */
function genaiMessage(message) {
  const parts = [];
  const content = message?.content;
  if (message?.role === 'tool') {
    parts.push({ type: 'tool_call_response', id: message.tool_call_id, response: textOf(content) });
  } else if (typeof content === 'string' && content !== '') {
    parts.push({ type: 'text', content });
  } else if (Array.isArray(content)) {
    for (const part of content) {
      if (part?.type === 'text') parts.push({ type: 'text', content: part.text });
    }
  }
  for (const call of message?.tool_calls ?? []) {
    parts.push({ type: 'tool_call', id: call.id, name: call.function?.name, arguments: call.function?.arguments });
  }
  return { role: message?.role, parts };
}

/** @param {unknown} content */
function textOf(content) {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((part) => part?.text ?? '').join('');
  return '';
}

/** One output message (a choice) as it streams. */
class Choice {
  constructor() {
    this.text = '';
    this.reasoning = '';
    /** @type {Map<number, {id: string | undefined, name: string | undefined, arguments: string}>} */
    this.calls = new Map();
    /** @type {string | undefined} */
    this.finishReason = undefined;
  }

  /** The choice as a GenAI output message. */
  message() {
    const parts = [];
    if (this.reasoning) parts.push({ type: 'reasoning', content: this.reasoning });
    if (this.text) parts.push({ type: 'text', content: this.text });
    for (const call of this.calls.values()) {
      parts.push({ type: 'tool_call', id: call.id, name: call.name, arguments: call.arguments });
    }
    return { role: 'assistant', parts, finish_reason: this.finishReason ?? 'stop' };
  }
}

/** A stream's chunks read into its choices, its deltas and its response's attributes. */
class ChunkReader {
  /** @param {DeltaRecorder | null} deltas */
  constructor(deltas) {
    this.deltas = deltas;
    /** @type {Map<number, Choice>} */
    this.choices = new Map();
    /** @type {Record<string, any>} */
    this.response = {};
  }

  /** @param {any} chunk */
  read(chunk) {
    if (typeof chunk?.model === 'string') this.response['gen_ai.response.model'] = chunk.model;
    if (typeof chunk?.id === 'string') this.response['gen_ai.response.id'] = chunk.id;
    const usage = chunk?.usage;
    if (usage != null) {
      if (Number.isInteger(usage.prompt_tokens)) this.response['gen_ai.usage.input_tokens'] = usage.prompt_tokens;
      if (Number.isInteger(usage.completion_tokens)) this.response['gen_ai.usage.output_tokens'] = usage.completion_tokens;
    }
    for (const choice of chunk?.choices ?? []) this.readChoice(choice);
  }

  /** @param {any} choice */
  readChoice(choice) {
    const position = Number.isInteger(choice?.index) ? choice.index : 0;
    let state = this.choices.get(position);
    if (state === undefined) {
      state = new Choice();
      this.choices.set(position, state);
    }
    const delta = choice?.delta ?? {};
    const deltas = this.deltas;
    if (typeof delta.reasoning_content === 'string') {
      state.reasoning += delta.reasoning_content;
      deltas?.piece(`${position}:thinking`, 'thinking', delta.reasoning_content, position);
    }
    if (typeof delta.content === 'string') {
      state.text += delta.content;
      deltas?.piece(`${position}:text`, 'text', delta.content, position);
    }
    for (const call of delta.tool_calls ?? []) {
      const index = Number.isInteger(call?.index) ? call.index : 0;
      const key = `${position}:tool:${index}`;
      let seen = state.calls.get(index);
      if (seen === undefined) {
        seen = { id: call.id, name: call.function?.name, arguments: '' };
        state.calls.set(index, seen);
        deltas?.openCall(key, seen.id, seen.name, position);
      }
      const fragment = call.function?.arguments;
      if (typeof fragment === 'string') {
        seen.arguments += fragment;
        deltas?.piece(key, 'tool_call', fragment, position);
      }
    }
    if (typeof choice?.finish_reason === 'string') {
      state.finishReason = choice.finish_reason;
      for (const index of state.calls.keys()) deltas?.closeCall(`${position}:tool:${index}`);
    }
  }

  /** The response's attributes for the span's end. */
  attributes() {
    const choices = [...this.choices.entries()].sort(([a], [b]) => a - b).map(([, choice]) => choice);
    return {
      ...this.response,
      'gen_ai.response.finish_reasons': choices.map((choice) => choice.finishReason ?? 'stop'),
      'gen_ai.output.messages': JSON.stringify(choices.map((choice) => choice.message())),
    };
  }
}

/**
 * The chunks of `stream`, read by `reader` on their way; the span ends with the stream.
 * @param {AsyncIterable<any>} stream
 * @param {ChunkReader} reader
 * @param {any} span
 */
async function* chunksOf(stream, reader, span) {
  let failed = false;
  try {
    for await (const chunk of stream) {
      try {
        reader.read(chunk);
      } catch (error) {
        swallowed(error);
      }
      yield chunk;
    }
  } catch (error) {
    failed = true;
    endWithError(span, error);
    throw error;
  } finally {
    if (!failed) {
      try {
        reader.deltas?.close();
        span.setAttributes(reader.attributes());
      } catch (error) {
        swallowed(error);
      }
      span.end(now());
    }
  }
}

/**
 * @param {any} span
 * @param {unknown} error
 */
function endWithError(span, error) {
  try {
    span.recordException(/** @type {Error} */ (error), now());
    span.setAttribute('error.type', /** @type {any} */ (error)?.constructor?.name ?? 'Error');
    span.setStatus({ code: SpanStatusCode.ERROR, message: String(/** @type {any} */ (error)?.message ?? error) });
  } catch (failure) {
    swallowed(failure);
  }
  span.end(now());
}

/**
 * Stream a Chat Completion from `client` (an `OpenAI` instance) inside a GenAI model-call span
 * that records its deltas; resolves to the chunks as an async iterable.
 * @param {any} client
 * @param {Record<string, any>} params `client.chat.completions.create`'s (`stream` is set)
 * @param {{tracer?: import('@opentelemetry/api').Tracer}} [options]
 * @returns {Promise<AsyncIterable<any>>}
 */
export async function tracedChatStream(client, params, { tracer } = {}) {
  const model = params?.model;
  let attributes = {};
  try {
    attributes = {
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': model,
      'gen_ai.input.messages': JSON.stringify((params?.messages ?? []).map(genaiMessage)),
    };
  } catch (error) {
    swallowed(error);
  }
  const span = (tracer ?? trace.getTracer(TRACER_NAME)).startSpan(`chat ${model}`,
    { kind: SpanKind.CLIENT, attributes, startTime: now() });
  let stream;
  try {
    stream = await context.with(trace.setSpan(context.active(), span),
      () => client.chat.completions.create({ ...params, stream: true }));
  } catch (error) {
    endWithError(span, error);
    throw error;
  }
  return chunksOf(stream, new ChunkReader(DeltaRecorder.on(span, now)), span);
}
