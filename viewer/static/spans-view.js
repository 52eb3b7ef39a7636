// The run's spans as a collapsible tree, with every record each span left in the bundle.
//
// By default a bundle keeps journal records, not spans (docs/bundle-format.md): each record
// carries the trace and span id it came from, its time and its payload (redacted as the bundle
// is), but not the span's parent, its other attributes, its events or its resource. So the tree
// groups the records by span id and nests the groups as the run nests them: turn spans under the
// run's span, the spans of a turn's messages, tools and guards under that turn's. Records with
// no span id (written by the API with no span, or a test's writer) are grouped by what they are about.
//
// A run recorded with span records (OTEL_SESSION_SPAN_RECORDS=on, the collector's --span-records)
// has one `span` record per span: then each span is named as it was, nested under its parent span
// (`parent_span_id`), and shows its kind, status, scope, attributes, events, links and resource
// (redacted and bounded as recorded; `cut` says what the bounds left out). A span whose parent's
// record is not read yet (a page later) nests as above until it is, and so does one whose parent ids
// would make a cycle (span records naming each other), so that every span is shown once.
//
// It reads the run a page at a time (`source(afterSeq, limit)`, the `/events` reads): a run of a
// million records is never read whole; "Load more" fetches the next page and merges it (of a run
// still recording, the records written since).
import { fill, h, timeNode } from "./dom.js";
import { durationText } from "./runs-view.js";

const PAGE = 1000;
const MAX_RECORDS_SHOWN = 200; // a span's records listed at once; the rest behind "show all"

/** The group a record belongs to: its span, else the message, tool or turn it is about. */
function groupKey(record) {
  if (record.span_id) return `s:${record.trace_id ?? ""}/${record.span_id}`;
  if (record.message_id != null) return `m:${record.message_id}`;
  if (record.tool_call_id != null) return `t:${record.tool_call_id}`;
  if (record.type === "run_started" || record.type === "run_finished" || record.turn_index == null) return "run";
  return `turn:${record.turn_index}`;
}

function atMs(at) {
  const value = Date.parse(at);
  return Number.isNaN(value) ? null : value;
}

/** What a group of records is, from the records themselves (and its span record): name, kind and status. */
function describe(group) {
  const types = new Set(group.records.map((record) => record.type));
  const first = (type) => group.records.find((record) => record.type === type);
  const span = group.span?.payload;
  let kind = "span";
  let name = group.key.startsWith("s:") ? `span ${group.spanId}` : "records";
  if (types.has("run_started") || types.has("run_finished")) {
    kind = "run";
    name = `run ${first("run_started")?.payload?.agent ?? ""}`.trim();
  } else if (types.has("turn_started") || types.has("turn_finished")) {
    kind = "turn";
    name = `turn ${group.turnIndex ?? "?"}`;
  } else if (types.has("tool_execution_started") || types.has("tool_execution_finished")) {
    kind = "tool";
    name = `tool ${first("tool_execution_started")?.payload?.name ?? "?"}`;
  } else if (types.has("message_started") || types.has("message_finished") || types.has("assistant_delta")) {
    kind = "message";
    const finished = first("message_finished")?.payload;
    name = `${first("message_started")?.payload?.role ?? "assistant"} message${finished?.model ? ` · ${finished.model}` : ""}`;
  } else if (types.has("guard_evaluated")) {
    kind = "guard";
    name = `guard ${first("guard_evaluated")?.payload?.name ?? "?"}`;
  } else if (group.key.startsWith("turn:")) {
    kind = "turn";
    name = `turn ${group.turnIndex}`;
  }
  if (typeof span?.name === "string" && span.name) name = span.name;
  const failed = span?.status?.code === "error" || group.records.some((record) =>
    (record.type === "tool_execution_finished" && record.payload?.status === "error")
    || (record.type === "run_finished" && record.payload?.status !== "ok"));
  const closed = span != null || types.has("run_finished") || types.has("turn_finished") || types.has("message_finished")
    || types.has("tool_execution_finished") || kind === "guard" || kind === "span";
  return { kind, name, status: failed ? "error" : closed ? "ok" : "open" };
}

/** The first and last times and seqs of a group: its span's start and end when it has a span record. */
function extent(group) {
  const all = group.span ? [...group.records, group.span] : group.records;
  const seqs = all.map((record) => record.seq);
  const span = group.span?.payload;
  return {
    firstSeq: Math.min(...seqs),
    lastSeq: Math.max(...seqs),
    start: span ? atMs(span.started_at) : atMs(group.records[0].at),
    end: span ? atMs(span.ended_at) : atMs(group.records[group.records.length - 1].at),
    startAt: span?.started_at ?? group.records[0].at,
  };
}

const SPANS_KEPT = "This run was recorded with span records: each span as the app sent it (its parent, attributes, "
  + "events, links and resource, redacted as recorded), nested by parent span id, with the journal records it left.";
const SPANS_NOT_KEPT = "This run was recorded without span records: a span's journal records are kept (their trace and "
  + "span ids, times and payloads, redacted as recorded), not the span itself, so spans are nested as the run nests "
  + "them (turns under the run, messages, tools and guards under their turn) and attributes no record carries are not "
  + "shown. Record with OTEL_SESSION_SPAN_RECORDS=on (the collector's --span-records) to keep every span.";

export class SpanTree {
  /** `source(afterSeq, limit)` resolves to `{events, next_after_seq, last_seq?}` (the `/events` page). */
  constructor(target, source) {
    this.target = target;
    this.source = source;
    this.groups = new Map();
    this.after = 0;
    this.done = false;
    this.lastSeq = null;
    this.loaded = 0;
    this.recording = false;
    this.open = new Set();
  }

  reset(source) {
    Object.assign(this, { source, groups: new Map(), after: 0, done: false, lastSeq: null, loaded: 0, recording: false });
  }

  async loadMore() {
    if (this.done) return;
    const page = await this.source(this.after, PAGE);
    for (const record of page.events) this.add(record);
    this.loaded += page.events.length;
    if (page.last_seq != null) this.lastSeq = page.last_seq;
    if (page.events.length) this.after = page.next_after_seq ?? page.events[page.events.length - 1].seq;
    this.recording = page.capture_status === "recording";
    if (page.next_after_seq == null && !this.recording) this.done = true; // a recording run may have more later
    this.render();
  }

  add(record) {
    const key = groupKey(record);
    let group = this.groups.get(key);
    if (!group) {
      group = { key, spanId: record.span_id ?? null, traceId: record.trace_id ?? null, turnIndex: record.turn_index ?? null, records: [], span: null };
      this.groups.set(key, group);
    }
    if (group.turnIndex == null && record.turn_index != null) group.turnIndex = record.turn_index;
    if (record.type === "span" && record.payload && typeof record.payload === "object") group.span = record;
    else group.records.push(record);
  }

  /** The groups nested: under their parent span when a span record names it, else turns under
   * the run and the rest under their turn (else the run). A span whose named parent would put it
   * on a cycle (span records naming each other: a buggy or hostile sender) nests as though its
   * record named none, so that every group is shown once. */
  tree() {
    const described = [...this.groups.values()].map((group) => ({ ...group, ...describe(group), ...extent(group), children: [] }));
    const byKey = new Map(described.map((node) => [node.key, node]));
    const run = described.find((node) => node.kind === "run") ?? null;
    const turns = new Map();
    for (const node of described) if (node.kind === "turn" && !turns.has(node.turnIndex)) turns.set(node.turnIndex, node);
    // acyclic: any node → its turn (a turn-kind node) → the run → none
    const nestedOf = (node) => (node === run ? null : node.kind === "turn" ? run : (turns.get(node.turnIndex) ?? run));
    const parentOf = (node) => {
      const parentId = node.span?.payload?.parent_span_id;
      if (typeof parentId === "string") {
        const parent = byKey.get(`s:${node.traceId ?? ""}/${parentId}`);
        if (parent) return parent;
      } else if (node.span && parentId === null) return null; // a root span
      return nestedOf(node);
    };
    const parents = new Map(described.map((node) => [node, parentOf(node)]));
    // each round moves every node on a cycle to its nesting; a cycle holds at least one named parent, so it ends
    for (let cyclic = onCycles(parents); cyclic.length; cyclic = onCycles(parents)) {
      for (const node of cyclic) parents.set(node, nestedOf(node));
    }
    const roots = [];
    for (const [node, parent] of parents) (parent ? parent.children : roots).push(node);
    const order = (nodes) => {
      nodes.sort((a, b) => a.firstSeq - b.firstSeq);
      for (const node of nodes) order(node.children);
      return nodes;
    };
    return order(roots);
  }

  render() {
    const roots = this.tree();
    const total = this.lastSeq != null ? ` of ${this.lastSeq}` : "";
    const withSpans = [...this.groups.values()].some((group) => group.span);
    fill(this.target,
      h("p", { class: "muted spans-note" }, withSpans ? SPANS_KEPT : SPANS_NOT_KEPT),
      h("p", { class: "muted spans-status" },
        `${this.groups.size} span${this.groups.size === 1 ? "" : "s"} from records 1–${this.loaded}${total}`,
        this.done ? "" : h("button", { type: "button", class: "spans-more", onclick: () => this.loadMore() },
          this.recording ? "Load new records" : `Load ${PAGE} more records`)),
      h("ul", { class: "span-tree", role: "tree" }, roots.map((node) => this.nodeView(node))));
  }

  nodeView(node) {
    const body = h("div", { class: "span-body" });
    const show = () => fill(body,
      h("dl", { class: "span-ids" },
        h("dt", {}, "span id"), h("dd", {}, h("code", {}, node.spanId ?? "none (records grouped by what they are about)")),
        h("dt", {}, "trace id"), h("dd", {}, h("code", {}, node.traceId ?? "none")),
        h("dt", {}, "start"), h("dd", {}, timeNode(node.startAt))),
      node.span ? spanView(node.span) : null,
      node.records.length ? this.recordsView(node) : null);
    const details = h("details", { class: `span-node kind-${node.kind}`, dataset: { key: node.key, spanId: node.spanId ?? "" },
      open: this.open.has(node.key), ontoggle: (event) => { // a span's records are drawn when it is opened
        if (event.target !== details) return;
        if (details.open) { this.open.add(node.key); show(); } else this.open.delete(node.key);
      } },
      h("summary", {},
        h("strong", {}, node.name), " ",
        h("span", { class: "badge" }, node.kind), " ",
        h("span", { class: `badge status-${node.status}` }, node.status), " ",
        node.span?.payload?.cut ? h("span", { class: "badge status-error", title: "the span record's bounds left some of it out" }, "cut") : null,
        node.span?.payload?.cut ? " " : null,
        h("span", { class: "muted" }, node.start != null && node.end != null ? durationText(node.end - node.start) : "–",
          ` · ${node.records.length} record${node.records.length === 1 ? "" : "s"}`,
          node.records.length ? ` · seq ${node.firstSeq}–${node.lastSeq}` : ` · span record seq ${node.lastSeq}`)),
      body,
      node.children.length ? h("ul", { role: "group" }, node.children.map((child) => this.nodeView(child))) : null);
    if (details.open) show();
    return h("li", { role: "treeitem" }, details);
  }

  recordsView(node) {
    const shown = node.records.slice(0, MAX_RECORDS_SHOWN);
    return h("table", { class: "grid span-records" },
      h("thead", {}, h("tr", {}, h("th", {}, "seq"), h("th", {}, "record"), h("th", {}, "at"), h("th", {}, "attributes"))),
      h("tbody", {}, shown.map((record) => h("tr", { dataset: { seq: record.seq } },
        h("td", { class: "num" }, record.seq),
        h("td", {}, record.type),
        h("td", {}, timeNode(record.at)),
        h("td", { class: "span-attributes" }, JSON.stringify(attributesOf(record)))))),
      node.records.length > shown.length
        ? h("caption", { class: "muted" }, `first ${shown.length} of ${node.records.length} records`) : null);
  }
}

/** The nodes on a cycle of `parents` (each node's parent, null for a root), each walked once. */
function onCycles(parents) {
  const walkOf = new Map(); // node → the walk that first reached it
  const cyclic = [];
  let walk = 0;
  for (const start of parents.keys()) {
    walk += 1;
    const path = [];
    let node = start;
    for (; node && !walkOf.has(node); node = parents.get(node)) {
      walkOf.set(node, walk);
      path.push(node);
    }
    if (node && walkOf.get(node) === walk) cyclic.push(...path.slice(path.indexOf(node))); // this walk met itself
  }
  return cyclic;
}

/** A value as the span record holds it: text as it is, the rest as JSON. */
function valueText(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** An attribute map as rows (a span's, its resource's, an event's or a link's). */
function attributesTable(attributes, what) {
  const entries = Object.entries(attributes && typeof attributes === "object" ? attributes : {});
  if (!entries.length) return h("p", { class: "muted" }, `no ${what}`);
  return h("table", { class: "grid span-attribute-table", dataset: { what } },
    h("tbody", {}, entries.map(([name, value]) => h("tr", {},
      h("th", { scope: "row" }, name), h("td", { class: "span-attributes" }, valueText(value))))));
}

/** What a span record says of its span, beside the records: kind, status, scope, parent,
 * attributes, events, links, resource and what was cut. */
function spanView(record) {
  const span = record.payload;
  const status = span.status && typeof span.status === "object" ? span.status : {};
  const scope = span.scope && typeof span.scope === "object" ? span.scope : {};
  const events = Array.isArray(span.events) ? span.events : [];
  const links = Array.isArray(span.links) ? span.links : [];
  const cut = span.cut && typeof span.cut === "object" ? Object.entries(span.cut) : [];
  return h("div", { class: "span-record", dataset: { seq: record.seq } },
    h("dl", { class: "span-ids" },
      h("dt", {}, "kind"), h("dd", {}, valueText(span.kind ?? "")),
      h("dt", {}, "status"), h("dd", {}, `${valueText(status.code ?? "")}${status.description != null ? ` · ${valueText(status.description)}` : ""}`),
      h("dt", {}, "parent span"), h("dd", {}, h("code", {}, span.parent_span_id ?? "none (a root)")),
      h("dt", {}, "scope"), h("dd", {}, `${valueText(scope.name ?? "")}${scope.version != null ? ` ${valueText(scope.version)}` : ""}`),
      h("dt", {}, "end"), h("dd", {}, timeNode(span.ended_at ?? record.at))),
    cut.length ? h("p", { class: "span-cut" }, "cut by the span record's bounds: ",
      cut.map(([section, count]) => `${section} ${count}`).join(", ")) : null,
    h("h4", {}, "attributes"), attributesTable(span.attributes, "attributes"),
    events.length ? [h("h4", {}, `events (${events.length})`), h("ul", { class: "span-events" }, events.map((event) =>
      h("li", {}, h("strong", {}, valueText(event?.name ?? "")), " ", timeNode(event?.at), attributesTable(event?.attributes, "event attributes"))))] : null,
    links.length ? [h("h4", {}, `links (${links.length})`), h("ul", { class: "span-links" }, links.map((link) =>
      h("li", {}, h("code", {}, `${valueText(link?.trace_id ?? "")} / ${valueText(link?.span_id ?? "")}`), attributesTable(link?.attributes, "link attributes"))))] : null,
    h("h4", {}, "resource"), attributesTable(span.resource, "resource"));
}

const SHOWN_ELSEWHERE = new Set(["seq", "at", "type", "session_id", "run_id", "span_id", "trace_id"]);

/** A record's own fields beside the ids and time the row already shows: its payload and the rest. */
function attributesOf(record) {
  return Object.fromEntries(Object.entries(record).filter(([name]) => !SHOWN_ELSEWHERE.has(name)));
}
