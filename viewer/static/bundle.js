// Offline bundles: parse the `…/bundle` download (an uncompressed ustar archive) and judge its
// integrity with the reader's rules (SPEC §5.5), all in the page: no server call is made.

import { decodeRecord } from "./reducer.js";

const decoder = new TextDecoder();
const REQUIRED = ["seq", "at", "type", "session_id", "run_id"];
const CAPTURE_STATUSES = new Set(["recording", "complete", "failed"]);

function field(header, start, length) {
  const bytes = header.subarray(start, start + length);
  const end = bytes.indexOf(0);
  return decoder.decode(end === -1 ? bytes : bytes.subarray(0, end));
}

/** Regular files of a tar archive, by base name: Map<string, Uint8Array>. */
export function parseTar(buffer) {
  const bytes = new Uint8Array(buffer);
  const files = new Map();
  let offset = 0;
  while (offset + 512 <= bytes.length) {
    const header = bytes.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) break;
    if (!field(header, 257, 6).startsWith("ustar")) throw new Error("not a bundle download (no ustar header)");
    const size = parseInt(field(header, 124, 12).trim() || "0", 8);
    if (!Number.isFinite(size) || size < 0) throw new Error("corrupt tar header");
    const type = String.fromCharCode(header[156]);
    const name = field(header, 0, 100);
    offset += 512;
    if (type === "0" || type === "\0") {
      files.set(name.split("/").pop(), bytes.slice(offset, offset + size));
    }
    offset += Math.ceil(size / 512) * 512;
  }
  return files;
}

function parseObject(bytes) {
  if (!bytes) return undefined;
  try {
    const value = JSON.parse(decoder.decode(bytes));
    return value && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}

const strictDecoder = new TextDecoder("utf-8", { fatal: true });

function parseRecord(bytes) {
  try {
    const record = decodeRecord(strictDecoder.decode(bytes));
    const valid = record && typeof record === "object" && !Array.isArray(record) &&
      REQUIRED.every((name) => name in record) && Number.isInteger(record.seq) &&
      typeof record.type === "string" && typeof record.at === "string";
    return valid ? record : null;
  } catch {
    return null; // not UTF-8 or not JSON
  }
}

/** Complete lines of a journal (split on newline bytes, each decoded strictly as UTF-8). */
function parseJournalBytes(bytes) {
  const events = [];
  const garbage = [];
  let start = 0;
  let lines = 0;
  for (let end = bytes.indexOf(10); end !== -1; end = bytes.indexOf(10, start)) {
    lines += 1;
    const record = parseRecord(bytes.subarray(start, end));
    if (record) events.push(record);
    else garbage.push(lines);
    start = end + 1;
  }
  return { events, lines, torn: bytes.length - start, garbage };
}

/** The reader's verdict on a bundle held in memory: {manifest, capture, events, diagnostics, status}. */
export function readBundle(files) {
  const diagnostics = [];
  const error = (code, message, where = {}) => diagnostics.push({ code, severity: "error", message, ...where });
  let manifest = parseObject(files.get("run.json"));
  if (!manifest || manifest.schema !== "otel-session.run.v1" || typeof manifest.session_id !== "string" ||
      typeof manifest.run_id !== "string") {
    manifest = null;
    error("invalid_manifest", "run.json is missing or not otel-session.run.v1");
  }
  let capture = parseObject(files.get("capture.json"));
  if (capture === undefined) {
    capture = null;
    error("missing_capture", "capture.json is missing");
  } else if (!capture || capture.schema !== "otel-session.capture.v1" || !CAPTURE_STATUSES.has(capture.status) ||
             !(Number.isInteger(capture.event_count) ||
               (capture.event_count == null && capture.status === "recording"))) {  // counts come at terminal status
    capture = null;
    error("invalid_capture", "capture.json is not a valid otel-session.capture.v1 document");
  }
  const { events, lines, torn, garbage } = parseJournalBytes(files.get("events.ndjson") ?? new Uint8Array());
  for (const line of garbage) error("garbage_line", "not a journal record", { line });
  let expected = 1;
  for (const event of events) {
    if (manifest && (event.session_id !== manifest.session_id || event.run_id !== manifest.run_id)) {
      error("garbage_line", "record belongs to another session or run", { seq: event.seq });
    }
    if (event.seq !== expected) error("seq_gap", `expected seq ${expected}, found ${event.seq}`, { seq: event.seq });
    expected = event.seq + 1;
    if (event.truncated === "depth") {  // journal.py cut values nested past MAX_DEPTH
      diagnostics.push({ code: "value_truncated", severity: "warning", seq: event.seq,
        message: "values nested too deep were cut" });
    }
    if (event.type === "upstream_drop") {
      diagnostics.push({ code: "upstream_drop", severity: "warning", seq: event.seq,
        message: `a span lost ${event.payload?.dropped_events ?? 0} events upstream` });
    }
  }
  if (torn) {
    diagnostics.push({ code: "torn_tail", severity: capture?.status === "complete" ? "error" : "warning",
      line: lines + 1, message: `final line is incomplete (${torn} bytes without a newline)` });
  }
  if (capture && capture.status !== "recording" && capture.event_count !== lines) {
    error("count_mismatch", `capture.json counts ${capture.event_count} events, the journal has ${lines} lines`);
  }
  const status = diagnostics.some((d) => d.severity === "error") ? "invalid" : capture.status;
  return { manifest, capture, events, diagnostics, status };
}
