// Details of what was clicked: a message's full text (every block, system prompts included), a model
// call's model and token usage, a tool's arguments, result or error, status and duration, and the
// raw JSON of its records (collapsible, highlighted, as stored: the bundle is already redacted).
// Everything goes in as text nodes.
import { fill, h, timeNode } from "./dom.js";
import { latencyText } from "./facts-view.js";
import { durationText } from "./runs-view.js";

const TOKEN = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;

/** JSON.stringify(value, null, 2) as a <pre> of spans classed key / string / number / literal. */
export function jsonView(value) {
  const text = JSON.stringify(value, null, 2) ?? "undefined";
  const pre = h("pre", { class: "json" });
  let last = 0;
  for (const match of text.matchAll(TOKEN)) {
    if (match.index > last) pre.append(text.slice(last, match.index));
    const [token, string, colon, literal] = match;
    const kind = string !== undefined ? (colon ? "key" : "string") : literal !== undefined ? "literal" : "number";
    pre.append(h("span", { class: `j-${kind}` }, string !== undefined && colon ? string : token));
    if (string !== undefined && colon) pre.append(colon);
    last = match.index + token.length;
  }
  pre.append(text.slice(last));
  return pre;
}

function payloadOf(records, type) {
  const record = records.find((event) => event.type === type);
  return record?.payload && typeof record.payload === "object" ? record.payload : null;
}

function messageText(records) {
  const finished = payloadOf(records, "message_finished");
  if (Array.isArray(finished?.content) && finished.content.length) {
    return finished.content.map((block) => ({ kind: block?.kind ?? "text", text: String(block?.text ?? "") }));
  }
  const blocks = new Map();
  for (const event of records) {
    if (event.type !== "assistant_delta") continue;
    const index = event.payload?.index ?? 0;
    const block = blocks.get(index) ?? { kind: event.payload?.kind ?? "text", text: "" };
    block.text += String(event.payload?.delta ?? "");
    blocks.set(index, block);
  }
  return [...blocks.values()];
}

function fields(pairs) {
  return h("dl", { class: "fields" }, pairs.filter(([, value]) => value !== undefined && value !== null && value !== "")
    .map(([name, value]) => [h("dt", {}, name), h("dd", {}, value instanceof Node ? value : String(value))]));
}

function body(span) {
  const records = span.records;
  if (span.kind === "message" || span.kind === "model") {
    const finished = payloadOf(records, "message_finished");
    const usage = span.usage ?? {};
    return [
      fields([
        ["role", span.role],
        ["model", span.kind === "model" ? span.model ?? "unknown" : null],
        ["input tokens", usage.input_tokens], ["output tokens", usage.output_tokens],
        ["first delta after", span.ttfdMs != null ? durationText(span.ttfdMs) : null],
        ["stop reason", finished?.stop_reason],
        ["settled", finished ? String(finished.settled === true) : "not finished"],
      ]),
      h("h4", {}, "Text"),
      messageText(records).map((block) => h("div", { class: `detail-block kind-${block.kind}` },
        block.kind === "text" ? null : h("span", { class: "muted" }, `${block.kind} · `), block.text)),
    ];
  }
  if (span.kind === "tool") {
    const started = payloadOf(records, "tool_execution_started") ?? {};
    const finished = payloadOf(records, "tool_execution_finished");
    return [
      fields([["name", started.name], ["status", finished ? finished.status ?? "?" : "running"],
        ["updates", records.filter((event) => event.type === "tool_execution_updated").length]]),
      h("h4", {}, "Arguments"), jsonView(started.arguments ?? null),
      finished && "result" in finished ? [h("h4", {}, "Result"), jsonView(finished.result)] : null,
      finished && "error" in finished ? [h("h4", { class: "status-error" }, "Error"), jsonView(finished.error)] : null,
    ];
  }
  if (span.kind === "turn" && span.summary) { // a long run's turn, from its summary (…/turns)
    const turn = span.summary;
    return fields([["state before", turn.state_before], ["state after", turn.state],
      ["missing slots", turn.open ? "not finished" : (turn.missing_required_slots ?? []).join(", ") || "none"],
      ["voice latency", latencyText(turn.latency)], ["interrupted", turn.interrupted ? "yes" : null],
      ["messages", turn.messages], ["tools", `${turn.tools}${turn.tool_errors ? ` (${turn.tool_errors} failed)` : ""}`]]);
  }
  if (span.kind === "turn") {
    const finished = payloadOf(records, "turn_finished");
    return fields([["state before", payloadOf(records, "turn_started")?.state], ["state after", finished?.state],
      ["missing slots", finished ? (finished.missing_required_slots ?? []).join(", ") || "none" : "not finished"],
      ["voice latency", latencyText(finished?.latency)], ["interrupted", finished?.interrupted ? "yes" : null]]);
  }
  return null;
}

/** Show `span` (a timeline span, or {kind: "record", records: [event]}) in `target`. */
export function renderDetails(target, span) {
  if (!span) {
    target.hidden = true;
    return;
  }
  const first = span.records[0];
  const last = span.records[span.records.length - 1];
  fill(target,
    h("div", { class: "details-head" },
      h("strong", {}, span.label ?? span.kind),
      span.error ? h("span", { class: "badge status-error" }, "error") : null,
      h("span", { class: "muted" }, first
        ? [` seq ${first.seq}${last !== first ? `–${last.seq}` : ""} · `, timeNode(first.at)]
        : [` seq ${span.startSeq ?? "?"}–${span.endSeq ?? "?"} · `, timeNode(span.summary?.start_at)]),
      span.endMs != null ? h("span", { class: "muted" }, ` · ${durationText(span.endMs - span.startMs)}${span.open ? " (open)" : ""}`) : null,
      h("button", { type: "button", class: "close", id: "details-close", title: "Close details" }, "×")),
    body(span),
    h("details", { class: "raw" }, h("summary", {}, `Raw JSON (${span.records.length} record${span.records.length === 1 ? "" : "s"})`),
      span.records.map(jsonView)));
  target.hidden = false;
  target.dataset.key = span.key ?? "";
  target.querySelector("#details-close").addEventListener("click", () => renderDetails(target, null));
}
