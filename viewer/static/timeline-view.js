// The waterfall view: one SVG row per span of buildTimeline(), bars on one time axis, errors in red,
// the latency to first delta as a darker lead-in, durations at the right, the replay cursor as a
// line across every row. Clicking a row seeks to its first record and selects it for details.
//
//   const view = new TimelineView(container, { onPick(span) {} })
//   view.setTimeline(timeline)   // rebuilds the rows (the journal grew or was replaced)
//   view.setCursor(seq)          // moves the line; marks spans not yet started and spans open at seq
//   view.select(key)             // outlines the selected span
import { svg } from "./dom.js";
import { durationText } from "./runs-view.js";

const ROW = 20;
const AXIS = 22;
const LABEL_W = 230;
const VALUE_W = 175;
const TICKS = 8;
const LABEL_CHARS = 34; // the full label is in the row's tooltip and its details

function niceStep(totalMs) {
  const raw = Math.max(totalMs, 1) / TICKS;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((factor) => factor * power).find((step) => step >= raw);
}

function valueText(span) {
  const parts = [durationText(span.endMs - span.startMs) + (span.open ? "+" : "")];
  if (span.ttfdMs != null) parts.push(`first delta ${durationText(span.ttfdMs)}`);
  return parts.join(" · ");
}

export class TimelineView {
  constructor(container, { onPick }) {
    this.container = container;
    this.onPick = onPick;
    this.timeline = null;
    this.rows = [];
    this.cursorLine = null;
    this.selected = null;
    this.scale = 1;
    this.cursor = null;
  }

  x(ms) {
    return LABEL_W + ms * this.scale;
  }

  setTimeline(timeline) {
    this.timeline = timeline;
    const width = Math.max(this.container.clientWidth, 640);
    const barWidth = width - LABEL_W - VALUE_W;
    this.scale = barWidth / Math.max(timeline.endMs, 1);
    const height = AXIS + timeline.spans.length * ROW + 4;
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "timeline-svg", role: "list" });
    const step = niceStep(timeline.endMs);
    for (let ms = 0; ms <= timeline.endMs + 1e-9; ms += step) {
      root.append(
        svg("line", { class: "tick", x1: this.x(ms), x2: this.x(ms), y1: AXIS - 4, y2: height }),
        svg("text", { class: "tick-label", x: this.x(ms) + 2, y: 12 }, durationText(ms)),
      );
    }
    this.rows = timeline.spans.map((span, index) => {
      const y = AXIS + index * ROW;
      const left = this.x(span.startMs);
      const barW = Math.max(2, (span.endMs - span.startMs) * this.scale);
      const classes = ["span", `kind-${span.kind}`, span.error ? "error" : "", span.open ? "open" : ""].filter(Boolean).join(" ");
      const row = svg("g", {
        class: classes, role: "listitem", tabindex: 0,
        dataset: { key: span.key, kind: span.kind, startSeq: span.startSeq, endSeq: span.endSeq },
      },
      svg("rect", { class: "row-bg", x: 0, y, width, height: ROW }),
      svg("text", { class: "label", x: 6 + span.depth * 14, y: y + 14 },
        span.label.length > LABEL_CHARS ? `${span.label.slice(0, LABEL_CHARS - 1)}…` : span.label),
      svg("rect", { class: "bar", x: left, y: y + 4, width: barW, height: ROW - 8, rx: 2 }),
      span.ttfdMs != null
        ? svg("rect", { class: "ttfd", x: left, y: y + 4, width: Math.max(1, Math.min(span.ttfdMs * this.scale, barW)), height: ROW - 8 })
        : null,
      svg("text", { class: "value", x: width - VALUE_W + 6, y: y + 14 }, valueText(span)),
      svg("title", {}, `${span.label} · ${valueText(span)} · seq ${span.startSeq}–${span.endSeq}${span.error ? " · error" : ""}`));
      const pick = () => this.onPick(span);
      row.addEventListener("click", pick);
      row.addEventListener("keydown", (event) => { if (event.key === "Enter") pick(); });
      return { span, row };
    });
    for (const { row } of this.rows) root.append(row);
    this.cursorLine = svg("line", { class: "cursor-line", id: "timeline-cursor", x1: LABEL_W, x2: LABEL_W, y1: 0, y2: height });
    root.append(this.cursorLine);
    this.container.replaceChildren(root);
    this.select(this.selected);
    if (this.cursor !== null) this.setCursor(this.cursor); // a rebuild (resize, live growth) keeps the cursor
  }

  setCursor(seq) {
    this.cursor = seq;
    if (!this.timeline) return;
    const x = this.x(this.timeline.atMs(seq));
    this.cursorLine.setAttribute("x1", x);
    this.cursorLine.setAttribute("x2", x);
    this.cursorLine.dataset.seq = String(seq);
    for (const { span, row } of this.rows) {
      row.classList.toggle("future", span.startSeq > seq);
      row.classList.toggle("active", span.startSeq <= seq && (span.open || span.endSeq > seq));
    }
  }

  select(key) {
    this.selected = key;
    for (const { span, row } of this.rows) row.classList.toggle("selected", span.key === key);
  }
}
