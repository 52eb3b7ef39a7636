// The deterministic replay reducer, JavaScript twin of otel_session/replay/reduce.py (SPEC §7.1).
//
//   replayState(events, seq = null) -> state   pure; the state after every event with seq <= seq
//   canonicalJson(value) -> string              the same bytes (as UTF-8) as Python's canonical_json
//   new Replayer(events).stateAt(seq)           seeks through checkpoints every 256 events
//   new Replayer(events, stateFrom(view.state, view.folded))  folds on from a server's checkpoint view
//   parseJournal(text) -> {events, garbage, torn}   the tolerant events.ndjson parser (offline bundles)
//   decodeRecord(line) -> value                 one line, cut at MAX_DEPTH like Python's journal.decode_line
//   runEvents(events, manifest) -> events       only the run's own records, like Python's run_events
//
// A dependency-free ES module: no build step. The rules, field names and diagnostics match the
// Python reducer exactly; fixtures/replay/*.expected.ndjson hold the Python output at every seq and
// tests/replay/js/reducer.test.mjs checks this module against them byte for byte.
// States returned by a Replayer share message and tool objects with its cache: treat them as read-only.

export const CHECKPOINT_INTERVAL = 256;
/** Levels of objects and arrays a record holds (journal.MAX_DEPTH); deeper ones become DEPTH_MARKER. */
export const MAX_DEPTH = 128;
export const DEPTH_MARKER = `[truncated: nested deeper than ${MAX_DEPTH} levels]`;

const BLOCK_KINDS = new Set(["text", "thinking", "tool_call"]);
const TOOL_STATUSES = new Set(["ok", "error"]);
const REQUIRED_FIELDS = ["seq", "at", "type", "session_id", "run_id"];

const SEVERITY = {
  seq_gap: "error",
  duplicate_seq: "error",
  reconcile_mismatch: "warning",
  delta_after_finish: "warning",
  malformed_event: "warning",
  upstream_drop: "warning",
};


const isInt = (value) => typeof value === "number" && Number.isInteger(value);
const intOrNull = (value) => (isInt(value) ? value : null);
const strOrNull = (value) => (typeof value === "string" ? value : null);
const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const own = (object, key) => (Object.prototype.hasOwnProperty.call(object, key) ? object[key] : undefined);
const orNull = (value) => (value === undefined ? null : value);

class Message {
  constructor(messageId) {
    this.messageId = messageId;
    this.role = null;
    this.turnIndex = null;
    this.settled = false;
    this.finished = false;
    this.folded = false;
    this.blocks = new Map(); // index -> [kind, text]
    this.rendered = null;
  }

  copy() {
    const clone = new Message(this.messageId);
    clone.role = this.role;
    clone.turnIndex = this.turnIndex;
    clone.settled = this.settled;
    clone.finished = this.finished;
    clone.folded = this.folded;
    clone.blocks = new Map([...this.blocks].map(([index, block]) => [index, [...block]]));
    return clone;
  }

  render() {
    if (this.rendered === null) {
      this.rendered = {
        message_id: this.messageId,
        role: this.role,
        turn_index: this.turnIndex,
        settled: this.settled,
        finished: this.finished,
        blocks: [...this.blocks.keys()]
          .sort((a, b) => a - b)
          .map((index) => ({ index, kind: this.blocks.get(index)[0], text: this.blocks.get(index)[1] })),
      };
    }
    return this.rendered;
  }
}

class Tool {
  constructor(toolCallId) {
    this.fields = {
      tool_call_id: toolCallId,
      name: null,
      status: "running",
      updates: 0,
      started_at: null,
      finished_at: null,
      turn_index: null,
      arguments: null,
      result: null,
      error: null,
    };
    this.rendered = null;
  }

  copy() {
    const clone = new Tool(this.fields.tool_call_id);
    clone.fields = { ...this.fields };
    return clone;
  }

  render() {
    if (this.rendered === null) this.rendered = { ...this.fields };
    return this.rendered;
  }
}

function sameBlocks(a, b) {
  if (a.size !== b.size) return false;
  for (const [index, block] of a) {
    const other = b.get(index);
    if (!other || other[0] !== block[0] || other[1] !== block[1]) return false;
  }
  return true;
}

function finalBlocks(content) {
  const blocks = new Map();
  if (!Array.isArray(content)) return blocks;
  content.forEach((entry, position) => {
    if (!isObject(entry)) return;
    const index = intOrNull(own(entry, "index"));
    const kind = own(entry, "kind");
    const text = own(entry, "text");
    blocks.set(index === null ? position : index, [
      BLOCK_KINDS.has(kind) ? kind : "text",
      typeof text === "string" ? text : "",
    ]);
  });
  return blocks;
}

// Over a base checkpoint, a State holds only what changed since (in first-change order); see _State
// in otel_session/replay/reduce.py. A seek costs O(events folded) plus one copy of the rendered lists.
function patched(base, positions, changed) {
  const rendered = base.slice();
  for (const [key, item] of changed) {
    const position = positions.get(key);
    if (position === undefined) rendered.push(item.render());
    else rendered[position] = item.render();
  }
  return rendered;
}

function merged(base, changed) {
  const result = new Map(base);
  for (const [key, value] of changed) result.set(key, value);
  return result;
}

class State {
  constructor(base = null) {
    this.seq = base === null ? 0 : base.seq;
    this.runId = base === null ? null : base.runId;
    this.turnIndex = base === null ? null : base.turnIndex;
    this.state = base === null ? null : base.state;
    this.runStatus = base === null ? null : base.runStatus;
    this.messages = new Map();
    this.tools = new Map();
    this.slots = new Map();
    this.verdicts = [];
    this.diagnostics = [];
    this.base = base;
    this.lists = null;
  }

  snapshot() {
    return new State(this);
  }

  freeze() {
    const base = this.base;
    if (base !== null) {
      this.messages = merged(base.messages, this.messages);
      this.tools = merged(base.tools, this.tools);
      this.slots = merged(base.slots, this.slots);
      this.verdicts = base.verdicts.concat(this.verdicts);
      this.diagnostics = base.diagnostics.concat(this.diagnostics);
      this.base = null;
    }
    return this;
  }

  renderedLists() {
    if (this.lists === null) {
      this.lists = {
        messages: [...this.messages.values()].map((message) => message.render()),
        messagePositions: new Map([...this.messages.keys()].map((key, position) => [key, position])),
        tools: [...this.tools.values()].map((tool) => tool.render()),
        toolPositions: new Map([...this.tools.keys()].map((key, position) => [key, position])),
      };
    }
    return this.lists;
  }

  render() {
    const base = this.base;
    let messages, tools, slots, verdicts, diagnostics;
    if (base === null) {
      messages = [...this.messages.values()].map((message) => message.render());
      tools = [...this.tools.values()].map((tool) => tool.render());
      slots = Object.fromEntries(this.slots);
      verdicts = [...this.verdicts];
      diagnostics = [...this.diagnostics];
    } else {
      const lists = base.renderedLists();
      messages = patched(lists.messages, lists.messagePositions, this.messages);
      tools = patched(lists.tools, lists.toolPositions, this.tools);
      slots = Object.fromEntries(merged(base.slots, this.slots));
      verdicts = base.verdicts.concat(this.verdicts);
      diagnostics = base.diagnostics.concat(this.diagnostics);
    }
    return {
      seq: this.seq,
      run_id: this.runId,
      turn_index: this.turnIndex,
      state: this.state,
      run_status: this.runStatus,
      messages,
      tools,
      slots,
      verdicts,
      diagnostics,
    };
  }

  diagnose(code, message, seq) {
    this.diagnostics.push({ code, severity: SEVERITY[code], message, seq });
  }

  findMessage(messageId) {
    let message = this.messages.get(messageId);
    if (message === undefined && this.base !== null) message = this.base.messages.get(messageId);
    return message;
  }

  message(messageId) {
    let message = this.messages.get(messageId);
    if (message === undefined) {
      const existing = this.base === null ? undefined : this.base.messages.get(messageId);
      message = existing === undefined ? new Message(messageId) : existing.copy();
      this.messages.set(messageId, message);
    } else {
      message.rendered = null;
    }
    return message;
  }

  tool(toolCallId) {
    let tool = this.tools.get(toolCallId);
    if (tool === undefined) {
      const existing = this.base === null ? undefined : this.base.tools.get(toolCallId);
      tool = existing === undefined ? new Tool(toolCallId) : existing.copy();
      this.tools.set(toolCallId, tool);
    } else {
      tool.rendered = null;
    }
    return tool;
  }

  apply(event) {
    const seq = event.seq;
    if (seq <= this.seq) {
      this.diagnose("duplicate_seq", `seq ${seq} repeats; the later record is ignored`, seq);
      return;
    }
    if (seq !== this.seq + 1) this.diagnose("seq_gap", `expected seq ${this.seq + 1}, found ${seq}`, seq);
    this.seq = seq;
    if (typeof event.run_id === "string") this.runId = event.run_id;
    const handler = Object.prototype.hasOwnProperty.call(HANDLERS, event.type) ? HANDLERS[event.type] : null;
    if (handler !== null) handler(this, event, isObject(event.payload) ? event.payload : {});
  }
}

function requireId(state, event, field) {
  const value = event[field];
  if (typeof value === "string" && value !== "") return value;
  state.diagnose("malformed_event", `${event.type} without ${field}; ignored`, event.seq);
  return null;
}

function touchMessage(state, event) {
  const messageId = requireId(state, event, "message_id");
  if (messageId === null) return null;
  const message = state.message(messageId);
  if (message.turnIndex === null) {
    message.turnIndex = intOrNull(event.turn_index);
    if (message.turnIndex === null) message.turnIndex = state.turnIndex;
  }
  return message;
}

function touchTool(state, event) {
  const toolCallId = requireId(state, event, "tool_call_id");
  if (toolCallId === null) return null;
  const tool = state.tool(toolCallId);
  if (tool.fields.turn_index === null) {
    const turnIndex = intOrNull(event.turn_index);
    tool.fields.turn_index = turnIndex === null ? state.turnIndex : turnIndex;
  }
  return tool;
}

function onSlot(state, event, payload) {
  const slot = own(payload, "slot");
  if (typeof slot !== "string") {
    state.diagnose("malformed_event", `${event.type} without a slot name; ignored`, event.seq);
    return;
  }
  state.slots.set(slot, orNull(own(payload, "value")));
}

const HANDLERS = {
  run_started(state) {
    state.runStatus = "running";
  },
  run_finished(state, event, payload) {
    state.runStatus = strOrNull(own(payload, "status")) || "unknown";
  },
  turn_started(state, event, payload) {
    let turnIndex = intOrNull(event.turn_index);
    if (turnIndex === null) turnIndex = state.turnIndex === null ? 0 : state.turnIndex + 1;
    state.turnIndex = turnIndex;
    state.state = strOrNull(own(payload, "state")) || state.state;
  },
  turn_finished(state, event, payload) {
    state.state = strOrNull(own(payload, "state")) || state.state;
  },
  message_started(state, event, payload) {
    const message = touchMessage(state, event);
    if (message !== null) message.role = strOrNull(own(payload, "role")) || message.role;
  },
  assistant_delta(state, event, payload) {
    const index = own(payload, "index");
    const delta = own(payload, "delta");
    const kindValue = own(payload, "kind");
    const kind = kindValue === undefined ? "text" : kindValue;
    if (!isInt(index) || typeof delta !== "string" || !BLOCK_KINDS.has(kind)) {
      state.diagnose(
        "malformed_event",
        "assistant_delta needs an integer index, a string delta and a known kind; ignored",
        event.seq,
      );
      return;
    }
    const existing = typeof event.message_id === "string" ? state.findMessage(event.message_id) : undefined;
    if (existing !== undefined && existing.finished) {
      state.diagnose("delta_after_finish", `delta for message ${existing.messageId} after it finished; ignored`, event.seq);
      return;
    }
    const message = touchMessage(state, event);
    if (message === null) return;
    if (message.role === null) message.role = "assistant";
    message.folded = true;
    const block = message.blocks.get(index);
    if (block === undefined) message.blocks.set(index, [kind, delta]);
    else block[1] += delta;
  },
  message_finished(state, event, payload) {
    const message = touchMessage(state, event);
    if (message === null) return;
    message.finished = true;
    const final = finalBlocks(own(payload, "content"));
    if (own(payload, "settled") === true) {
      message.settled = true;
      if (message.folded && !sameBlocks(final, message.blocks)) {
        const indexes = new Set([...final.keys(), ...message.blocks.keys()]);
        const differing = [...indexes]
          .filter((index) => {
            const a = final.get(index);
            const b = message.blocks.get(index);
            return !a || !b || a[0] !== b[0] || a[1] !== b[1];
          })
          .sort((a, b) => a - b);
        state.diagnose(
          "reconcile_mismatch",
          `message ${message.messageId}: folded deltas differ from the final content at block ` +
            `${differing.join(", ")}; the final content wins`,
          event.seq,
        );
      }
      message.blocks = final;
    } else if (message.blocks.size === 0) {
      message.blocks = final;
    }
  },
  tool_execution_started(state, event, payload) {
    const tool = touchTool(state, event);
    if (tool === null) return;
    const fields = tool.fields;
    fields.name = strOrNull(own(payload, "name")) || fields.name;
    fields.status = "running";
    fields.started_at = orNull(event.at);
    fields.arguments = orNull(own(payload, "arguments"));
  },
  tool_execution_updated(state, event) {
    const tool = touchTool(state, event);
    if (tool !== null) tool.fields.updates += 1;
  },
  tool_execution_finished(state, event, payload) {
    const tool = touchTool(state, event);
    if (tool === null) return;
    const fields = tool.fields;
    const status = own(payload, "status");
    fields.status = TOOL_STATUSES.has(status) ? status : "error";
    fields.finished_at = orNull(event.at);
    fields.result = orNull(own(payload, "result"));
    fields.error = orNull(own(payload, "error"));
  },
  slot_write: onSlot,
  slot_diff: onSlot,
  transition_verdict(state, event, payload) {
    const turnIndex = intOrNull(event.turn_index);
    const candidates = own(payload, "candidates");
    state.verdicts.push({
      seq: event.seq,
      turn_index: turnIndex === null ? state.turnIndex : turnIndex,
      from: orNull(own(payload, "from")),
      to: orNull(own(payload, "to")),
      reason: orNull(own(payload, "reason")),
      candidates: Array.isArray(candidates) ? candidates : [],
    });
    state.state = strOrNull(own(payload, "to")) || state.state;
  },
  upstream_drop(state, event, payload) {
    const events = intOrNull(own(payload, "dropped_events")) || 0;
    const attributes = intOrNull(own(payload, "dropped_attributes")) || 0;
    state.diagnose(
      "upstream_drop",
      `a span lost ${events} events and ${attributes} attributes before it was received`,
      event.seq,
    );
  },
};

function ordered(events) {
  const withSeq = [];
  for (const event of events) if (isObject(event) && isInt(event.seq)) withSeq.push(event);
  return withSeq.sort((a, b) => a.seq - b.seq); // Array.prototype.sort is stable
}

/** Return the replay state after every event with seq <= `seq` (all events when null). */
export function replayState(events, seq = null) {
  const state = new State();
  for (const event of ordered(events)) {
    if (seq !== null && event.seq > seq) break;
    state.apply(event);
  }
  return state.render();
}

/** Yield the initial state, then the state after each event in seq order (one fold). */
export function* iterStates(events) {
  const state = new State();
  yield state.render();
  for (const event of ordered(events)) {
    state.apply(event);
    yield state.render();
  }
}

function bisectRight(values, target) {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (values[middle] <= target) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * A state rebuilt from a rendered one (the server's view of a checkpoint, `…/state?recent=`), to fold
 * on from. `folded` names its messages that folded deltas: rendering leaves that out, and a settled
 * message_finished compares the fold with the final content only then.
 */
export function stateFrom(rendered, folded = []) {
  const state = new State();
  const foldedIds = new Set(folded);
  state.seq = rendered.seq;
  state.runId = rendered.run_id;
  state.turnIndex = rendered.turn_index;
  state.state = rendered.state;
  state.runStatus = rendered.run_status;
  for (const entry of rendered.messages) {
    const message = new Message(entry.message_id);
    message.role = entry.role;
    message.turnIndex = entry.turn_index;
    message.settled = entry.settled;
    message.finished = entry.finished;
    message.folded = foldedIds.has(entry.message_id);
    message.blocks = new Map(entry.blocks.map((block) => [block.index, [block.kind, block.text]]));
    state.messages.set(entry.message_id, message);
  }
  for (const entry of rendered.tools) {
    const tool = new Tool(entry.tool_call_id);
    tool.fields = { ...entry };
    state.tools.set(entry.tool_call_id, tool);
  }
  state.slots = new Map(Object.entries(rendered.slots));
  state.verdicts = [...rendered.verdicts];
  state.diagnostics = [...rendered.diagnostics];
  return state;
}

/** Seekable replay of one journal, with lazily built checkpoints every CHECKPOINT_INTERVAL events;
 * from `base` (a stateFrom state) when given: `events` then follow it. */
export class Replayer {
  constructor(events = [], base = null) {
    this.events = [];
    this.seqs = [];
    this.checkpoints = [base ?? new State()];
    this.extend(events);
  }

  /** Add events (e.g. from a live stream). Out-of-order additions drop the affected checkpoints. */
  extend(events) {
    const added = ordered(events);
    if (added.length === 0) return;
    if (this.seqs.length && added[0].seq < this.seqs[this.seqs.length - 1]) {
      const firstChanged = bisectLeft(this.seqs, added[0].seq);
      this.checkpoints.length = Math.min(this.checkpoints.length, Math.floor(firstChanged / CHECKPOINT_INTERVAL) + 1);
      this.events = ordered(this.events.concat(added));
    } else {
      for (const event of added) this.events.push(event);
    }
    this.seqs = this.events.map((event) => event.seq);
  }

  get length() {
    return this.events.length;
  }

  /** The highest seq known (the base's, or 0, for no events). */
  get lastSeq() {
    return this.seqs.length ? this.seqs[this.seqs.length - 1] : this.checkpoints[0].seq;
  }

  /** Return the replay state after every event with seq <= `seq` (the newest when null). */
  stateAt(seq = null) {
    const count = seq === null ? this.events.length : bisectRight(this.seqs, seq);
    const slot = Math.floor(count / CHECKPOINT_INTERVAL);
    this.buildCheckpoints(slot);
    const state = this.checkpoints[slot].snapshot();
    for (let i = slot * CHECKPOINT_INTERVAL; i < count; i += 1) state.apply(this.events[i]);
    return state.render();
  }

  buildCheckpoints(slot) {
    while (this.checkpoints.length <= slot) {
      const built = this.checkpoints.length - 1;
      const state = this.checkpoints[built].snapshot();
      const end = Math.min((built + 1) * CHECKPOINT_INTERVAL, this.events.length);
      for (let i = built * CHECKPOINT_INTERVAL; i < end; i += 1) state.apply(this.events[i]);
      this.checkpoints.push(state.freeze());
    }
  }
}

function bisectLeft(values, target) {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (values[middle] < target) low = middle + 1;
    else high = middle;
  }
  return low;
}

/**
 * Canonical JSON: no whitespace, object keys sorted by UTF-16 code units, numbers and escapes as
 * JSON.stringify writes them (non-finite numbers become null, lone surrogates \udxxx).
 */
export function canonicalJson(value) {
  if (value === null || value === undefined) return "null";
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return "[" + value.map(canonicalJson).join(",") + "]";
  if (typeof value === "object") {
    const keys = Object.keys(value).sort();
    return "{" + keys.map((key) => JSON.stringify(key) + ":" + canonicalJson(value[key])).join(",") + "}";
  }
  throw new TypeError(`${typeof value} is not a JSON value`);
}

function tooDeep(value, depth) {
  if (value === null || typeof value !== "object") return false;
  if (depth > MAX_DEPTH) return true;
  return Object.values(value).some((item) => tooDeep(item, depth + 1));
}

function cutDeep(value, depth) {
  if (value === null || typeof value !== "object") return value;
  if (depth > MAX_DEPTH) return DEPTH_MARKER;
  if (Array.isArray(value)) return value.map((item) => cutDeep(item, depth + 1));
  const cut = {};
  for (const [key, item] of Object.entries(value)) {
    Object.defineProperty(cut, key, { value: cutDeep(item, depth + 1), enumerable: true, writable: true, configurable: true });
  }
  return cut;
}

/**
 * JSON.parse of one journal line, with every object or array nested past MAX_DEPTH replaced by
 * DEPTH_MARKER and `truncated: "depth"` set on the record (what Python's decode_line returns).
 */
export function decodeRecord(line) {
  const value = JSON.parse(line);
  if (line.length <= 2 * MAX_DEPTH + 1 || !isObject(value) || !tooDeep(value, 1)) return value;
  const cut = cutDeep(value, 1);
  cut.truncated = "depth";
  return cut;
}

function isRecord(value) {
  return (
    isObject(value) &&
    REQUIRED_FIELDS.every((name) => Object.prototype.hasOwnProperty.call(value, name)) &&
    isInt(value.seq) &&
    typeof value.type === "string" &&
    typeof value.at === "string"
  );
}

/**
 * Parse an events.ndjson text like the Python reader: complete lines only, garbage lines counted
 * and skipped, the trailing partial line returned as `torn` ("" when the text ends in a newline).
 */
export function parseJournal(text) {
  const end = text.lastIndexOf("\n") + 1;
  const events = [];
  const garbage = [];
  const lines = text.slice(0, end).split("\n");
  lines.pop();
  lines.forEach((line, position) => {
    let value;
    try {
      value = line.trim() === "" ? undefined : decodeRecord(line);
    } catch {
      value = undefined;
    }
    if (isRecord(value)) events.push(value);
    else garbage.push(position + 1);
  });
  return { events, garbage, torn: text.slice(end) };
}

/**
 * The records of one run (its manifest's session_id and run_id) in seq order, each seq once: what
 * otel_session.replay.facts.run_events gives the Python reducer. Without a manifest, the first record's ids.
 */
export function runEvents(events, manifest = null) {
  const records = events.filter(isObject);
  const reference = manifest && typeof manifest.run_id === "string" ? manifest : records[0];
  if (reference === undefined) return [];
  const own = ordered(
    records.filter((event) => event.run_id === reference.run_id && event.session_id === reference.session_id),
  );
  return own.filter((event, position) => position === 0 || event.seq !== own[position - 1].seq);
}
