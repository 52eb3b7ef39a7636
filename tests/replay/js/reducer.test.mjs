// Parity of viewer/static/reducer.js with the Python reducer: every shared fixture, every seq, byte for byte.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import {
  CHECKPOINT_INTERVAL,
  Replayer,
  canonicalJson,
  iterStates,
  parseJournal,
  replayState,
  runEvents,
  stateFrom,
} from "../../../viewer/static/reducer.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const fixtures = join(root, "fixtures", "replay");
const journals = readdirSync(fixtures)
  .filter((name) => name.endsWith(".ndjson") && !name.endsWith(".expected.ndjson"))
  .sort();

function expectedLines(name) {
  const bytes = readFileSync(join(fixtures, name.replace(/\.ndjson$/, ".expected.ndjson")));
  const lines = [];
  let start = 0;
  for (let i = 0; i < bytes.length; i += 1) {
    if (bytes[i] === 0x0a) {
      lines.push(bytes.subarray(start, i));
      start = i + 1;
    }
  }
  return lines;
}

const load = (name) => parseJournal(readFileSync(join(fixtures, name), "utf8"));

test("there are shared fixtures", () => {
  assert.ok(journals.length >= 8, `found ${journals.length} journals in ${fixtures}`);
});

for (const name of journals) {
  test(`${name}: the state at every seq matches the Python reducer byte for byte`, () => {
    const { events } = load(name);
    const expected = expectedLines(name);
    const actual = [...iterStates(events)].map((state) => Buffer.from(canonicalJson(state), "utf8"));
    assert.equal(actual.length, expected.length, "one state per event plus the initial state");
    actual.forEach((bytes, position) => {
      assert.ok(bytes.equals(expected[position]), `state #${position} differs:\n  js: ${bytes}\n  py: ${expected[position]}`);
    });
  });

  test(`${name}: replayState and Replayer.stateAt agree with the fold at every seq`, () => {
    const { events } = load(name);
    const expected = expectedLines(name).map((line) => line.toString("utf8"));
    const seqs = [0, ...events.map((event) => event.seq).sort((a, b) => a - b)];
    const replayer = new Replayer(events);
    // Seek backwards first so checkpoints are reused out of order.
    for (let position = seqs.length - 1; position >= 0; position -= 1) {
      const seq = seqs[position];
      const duplicate = position + 1 < seqs.length && seqs[position + 1] === seq;
      if (duplicate) continue; // a state "at seq" includes every record with that seq
      assert.equal(canonicalJson(replayer.stateAt(seq)), expected[position]);
      assert.equal(canonicalJson(replayState(events, seq)), expected[position]);
    }
  });
}

/** The messages a fold of `events` has folded deltas into (what the server's view sends as `folded`):
 * a valid assistant_delta reaching a message before it finished. */
function foldedIds(events) {
  const finished = new Set();
  const folded = new Set();
  for (const event of events) {
    const id = event.message_id;
    if (typeof id !== "string" || !id) continue;
    const payload = event.payload ?? {};
    if (event.type === "message_finished") finished.add(id);
    const valid = Number.isInteger(payload.index) && typeof payload.delta === "string" &&
      ["text", "thinking", "tool_call"].includes(payload.kind ?? "text");
    if (event.type === "assistant_delta" && valid && !finished.has(id)) folded.add(id);
  }
  return [...folded];
}

for (const name of journals) {
  test(`${name}: folding on from a rendered state (stateFrom) reaches the Python states`, () => {
    const events = [...load(name).events].filter((event) => Number.isInteger(event.seq)).sort((a, b) => a.seq - b.seq);
    const expected = expectedLines(name).map((line) => line.toString("utf8"));
    for (let split = 0; split <= events.length; split += 1) {
      const base = stateFrom(JSON.parse(expected[split]), foldedIds(events.slice(0, split)));
      const replayer = new Replayer(events.slice(split), base);
      for (let position = split + 1; position <= events.length; position += 1) {
        if (position < events.length && events[position].seq === events[position - 1].seq) continue;
        assert.equal(canonicalJson(replayer.stateAt(events[position - 1].seq)), expected[position], `from #${split} to #${position}`);
      }
    }
  });
}

test("parseJournal keeps a torn final line back and skips garbage", () => {
  const { events, garbage, torn } = load("torn_tail_partial_message.ndjson");
  assert.equal(events.length, 5);
  assert.deepEqual(garbage, []);
  assert.match(torn, /^\{"seq": 6/);
  const mixed = load("unknown_types_and_garbage.ndjson");
  assert.equal(mixed.garbage.length, 3);
  assert.equal(mixed.torn, "");
});

test("a long journal seeks through checkpoints to the same state as a full fold", () => {
  const events = [];
  let seq = 0;
  const push = (type, payload, extra = {}) => {
    seq += 1;
    events.push({ seq, at: "2026-11-29T22:52:00.000000Z", type, session_id: "s", run_id: "r", payload, ...extra });
  };
  for (let turn = 0; turn < 12; turn += 1) {
    push("turn_started", { state: `s${turn}` }, { turn_index: turn });
    push("message_started", { role: "assistant" }, { turn_index: turn, message_id: `m${turn}` });
    for (let i = 0; i < 90; i += 1) push("assistant_delta", { index: 0, kind: "text", delta: `${i} ` }, { message_id: `m${turn}` });
    push("slot_write", { slot: `slot${turn % 3}`, value: turn }, { turn_index: turn });
  }
  const replayer = new Replayer(events.slice(0, 500));
  replayer.extend(events.slice(500));
  assert.ok(replayer.length > 4 * CHECKPOINT_INTERVAL);
  for (const at of [replayer.lastSeq, 1, 700, 256, 257, 1024, 3, replayer.lastSeq - 1]) {
    assert.equal(canonicalJson(replayer.stateAt(at)), canonicalJson(replayState(events, at)), `seq ${at}`);
  }
  // Out-of-order additions rebuild the affected checkpoints.
  const late = new Replayer(events.filter((event) => event.seq % 2 === 0));
  late.stateAt(null);
  late.extend(events.filter((event) => event.seq % 2 === 1));
  assert.equal(canonicalJson(late.stateAt(null)), canonicalJson(replayState(events)));
});

test("canonicalJson sorts keys by UTF-16 code units and writes numbers like JSON.stringify", () => {
  assert.equal(canonicalJson({ b: 1, a: [1e21, 1e-7, -0, NaN], "😀": 1, "\uffff": 2 }), '{"a":[1e+21,1e-7,0,null],"b":1,"😀":1,"\uffff":2}');
  assert.equal(canonicalJson("\ud800"), '"\\ud800"');
});

test("runEvents keeps only the run's own records, in seq order, each seq once", () => {
  const record = (seq, runId, extra = {}) => ({ seq, at: "t", type: "slot_write", session_id: "s", run_id: runId, ...extra });
  const events = [record(2, "r1"), record(1, "r1"), record(3, "other"), record(2, "r1", { dup: true }), null, record(4, "r1")];
  assert.deepEqual(runEvents(events, { session_id: "s", run_id: "r1" }).map((e) => [e.seq, e.dup === true]), [
    [1, false],
    [2, false],
    [4, false],
  ]);
  assert.deepEqual(runEvents(events).map((e) => e.seq), [1, 2, 4]); // no manifest: the first record's run
  assert.deepEqual(runEvents([], null), []);
});
