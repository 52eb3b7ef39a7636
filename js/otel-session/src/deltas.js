/**
 * One streamed model call's deltas, recorded as `otel_session.delta` span events.
 *
 * Contract:
 *
 *     const deltas = DeltaRecorder.on(span);      // null unless `span` is a recording model-call span
 *     deltas.piece(key, 'text', 'Hel');           // a block (`key`) of the reply grows by a piece
 *     deltas.openCall(key, callId, name);         // a tool call's block begins ...
 *     deltas.piece(key, 'tool_call', '{"q":');    // ... its argument fragments ...
 *     deltas.closeCall(key);                      // ... and it ends
 *     deltas.close();                             // the stream ended: open calls closed
 *
 * The events are otel-session's own convention (docs/conventions.md, "Streamed deltas of
 * third-party model calls"): `otel_session.delta.message` (the output message's position),
 * `.index` (the content block, numbered in order of first appearance), `.kind` (`text`,
 * `thinking`, `tool_call`) and `.text` (the piece as streamed: the collector redacts it). A span
 * keeps a bounded number of events and drops the oldest beyond it, so at most its event limit less
 * 16 (room for its instrumentation's own events) are added; the rest are counted in the span's
 * `otel_session.deltas.dropped`. Nothing here throws into the app: a failure is counted
 * (`deltaStats().errors`), warned about once, and the stream goes on untouched.
 */

import { diag } from '@opentelemetry/api';

export const DELTA_EVENT = 'otel_session.delta';
export const DELTA_MESSAGE = 'otel_session.delta.message';
export const DELTA_INDEX = 'otel_session.delta.index';
export const DELTA_KIND = 'otel_session.delta.kind';
export const DELTA_TEXT = 'otel_session.delta.text';
export const DELTAS_DROPPED = 'otel_session.deltas.dropped';

const MODEL_OPERATIONS = new Set(['chat', 'text_completion', 'generate_content', 'completion']);
const RESERVED_EVENTS = 16; // room left on a span for its instrumentation's own events
const DEFAULT_EVENT_LIMIT = 128; // the OpenTelemetry SDKs' default (OTEL_SPAN_EVENT_COUNT_LIMIT)

const stats = { streams: 0, recorded: 0, dropped: 0, errors: 0 };
let warned = false;

/**
 * What this process recorded so far: streams tapped, delta events added, deltas dropped for want
 * of room on their span, and failures swallowed (each left its app's stream untouched).
 * @returns {{streams: number, recorded: number, dropped: number, errors: number}}
 */
export function deltaStats() {
  return { ...stats };
}

/**
 * Count a failure of the capture (never the app's) and warn about the first one.
 * @param {unknown} error
 */
export function swallowed(error) {
  stats.errors += 1;
  if (!warned) {
    warned = true;
    diag.warn(`otel-session: a streamed delta could not be recorded (counted in deltaStats().errors): ${error}`);
  }
}

/**
 * Whether `span` is a recording model-call span (GenAI `gen_ai.operation.name` chat and alike).
 * @param {any} span
 */
export function isModelCall(span) {
  if (span == null || typeof span.isRecording !== 'function' || !span.isRecording()) return false;
  const operation = span.attributes?.['gen_ai.operation.name'];
  return MODEL_OPERATIONS.has(operation);
}

/** How many more events `span` takes before it drops its oldest, less the reserved room. */
function roomOn(span) {
  const configured = span._spanLimits?.eventCountLimit;
  const fromEnv = Number.parseInt(process.env.OTEL_SPAN_EVENT_COUNT_LIMIT ?? '', 10);
  const limit = Number.isInteger(configured) ? configured
    : Number.isInteger(fromEnv) && fromEnv >= 0 ? fromEnv : DEFAULT_EVENT_LIMIT;
  const held = Array.isArray(span.events) ? span.events.length : 0;
  return Math.max(0, limit - RESERVED_EVENTS - held);
}

/**
 * The head of a tool call's block as its final text reads (`{"id":…,"name":…,"arguments":`):
 * the collector's `tool_call_text` writes the whole block the same way.
 * @param {unknown} callId
 * @param {unknown} name
 */
function callOpening(callId, name) {
  /** @type {Record<string, unknown>} */
  const head = {};
  if (callId != null) head.id = callId;
  if (name != null) head.name = name;
  const text = JSON.stringify(head);
  return text.slice(0, -1) + (text.length > 2 ? ',' : '') + '"arguments":';
}

export class DeltaRecorder {
  /**
   * A recorder on `span` when it is a recording model-call span, else null. `clock` gives each
   * event's time; by default the span's own clock stamps it (a span that was given its start time
   * needs the times given as well: the SDK would stamp whole milliseconds).
   * @param {any} span
   * @param {() => number | undefined} [clock]
   * @returns {DeltaRecorder | null}
   */
  static on(span, clock = () => undefined) {
    try {
      if (!isModelCall(span)) return null;
      stats.streams += 1;
      return new DeltaRecorder(span, clock);
    } catch (error) {
      swallowed(error);
      return null;
    }
  }

  /**
   * @param {any} span
   * @param {() => number | undefined} clock
   */
  constructor(span, clock) {
    this.span = span;
    this.clock = clock;
    this.room = roomOn(span);
    this.dropped = 0;
    /** @type {Map<string, {position: number, index: number, kind: string}>} */
    this.blocks = new Map();
    /** @type {Map<number, number>} blocks so far per output message */
    this.perMessage = new Map();
    /** @type {Map<string, number>} open tool-call blocks → their message's position */
    this.openCalls = new Map();
    this.closed = false;
  }

  /**
   * A piece of the reply's block `key` (a new key opens the next block).
   * @param {string} key
   * @param {'text' | 'thinking' | 'tool_call'} kind
   * @param {unknown} text
   * @param {number} [position]
   */
  piece(key, kind, text, position = 0) {
    if (this.closed || typeof text !== 'string' || text === '') return;
    try {
      let block = this.blocks.get(key);
      if (block === undefined) {
        const index = this.perMessage.get(position) ?? 0;
        this.perMessage.set(position, index + 1);
        block = { position, index, kind };
        this.blocks.set(key, block);
      }
      if (this.room <= 0) {
        this.dropped += 1;
        stats.dropped += 1;
        // Said at once, not at close: a stream aborted or left early can see its span ended first.
        if (this.span.isRecording()) this.span.setAttribute(DELTAS_DROPPED, this.dropped);
        return;
      }
      this.room -= 1;
      if (!this.span.isRecording()) return;
      this.span.addEvent(DELTA_EVENT, {
        [DELTA_MESSAGE]: block.position, [DELTA_INDEX]: block.index, [DELTA_KIND]: block.kind, [DELTA_TEXT]: text,
      }, this.clock());
      stats.recorded += 1;
    } catch (error) {
      swallowed(error);
    }
  }

  /**
   * A tool call's block begins: its head (`{"id":…,"name":…,"arguments":`).
   * @param {string} key
   * @param {unknown} callId
   * @param {unknown} name
   * @param {number} [position]
   */
  openCall(key, callId, name, position = 0) {
    if (this.closed || this.openCalls.has(key)) return;
    this.openCalls.set(key, position);
    this.piece(key, 'tool_call', callOpening(callId, name), position);
  }

  /** @param {string} key */
  isOpenCall(key) {
    return this.openCalls.has(key);
  }

  /** @param {string} key */
  closeCall(key) {
    const position = this.openCalls.get(key);
    if (position === undefined) return;
    this.openCalls.delete(key);
    this.piece(key, 'tool_call', '}', position);
  }

  /** The stream ended (or failed): open calls closed (their closing pieces counted as drops past the room). */
  close() {
    if (this.closed) return;
    try {
      for (const key of [...this.openCalls.keys()]) this.closeCall(key);
      this.closed = true;
    } catch (error) {
      this.closed = true;
      swallowed(error);
    }
  }
}
