// The state graph view (seed 001's node-card rule): every node is one card of ONE canonical size,
// chosen before layout from the longest text any card will ever hold, so replay and live updates
// change card contents and classes, never a card's bounds or an edge's route.
//
// Card slots, top to bottom: status symbol (● current, ✓ entered, ○ not yet) and the state's full
// name (wrapped, never cut: a long name makes every card taller); "entered N× · M turns"; "start"
// for the first state. Edges are verdicts, labelled with their reasons and counts.
//
//   const view = new GraphView(container)
//   view.setGraph(graph)    // measure, size every card, lay out (once per journal)
//   view.setCursor(seq)     // highlight the current state, fill counts, mark traversed edges
import { svg } from "./dom.js";

const FONT = "600 12.5px system-ui, -apple-system, 'Segoe UI', sans-serif";
const SMALL_FONT = "11.5px system-ui, -apple-system, 'Segoe UI', sans-serif";
const LINE = 16;
const PAD = 8;
const SYMBOL_W = 16;
const MAX_NAME_W = 200;
const MIN_CARD_W = 130;
const MIN_GAP_X = 90;
const MAX_GAP_X = 280;
const GAP_Y = 70;
const MARGIN = 24;

let measurer = null;

function width(text, font) {
  measurer = measurer ?? document.createElement("canvas").getContext("2d");
  measurer.font = font;
  return measurer.measureText(text).width;
}

/** Words of `text` in lines no wider than MAX_NAME_W (a single long word breaks by characters). */
export function wrap(text) {
  const lines = [];
  let line = "";
  for (const word of text.split(/(?<=[\s_\-./:])/)) {
    const candidate = line + word;
    if (!line || width(candidate, FONT) <= MAX_NAME_W) {
      line = candidate;
    } else {
      lines.push(line);
      line = word;
    }
    while (width(line, FONT) > MAX_NAME_W && line.length > 1) {
      let cut = line.length - 1;
      while (cut > 1 && width(line.slice(0, cut), FONT) > MAX_NAME_W) cut -= 1;
      lines.push(line.slice(0, cut));
      line = line.slice(cut);
    }
  }
  lines.push(line);
  return lines;
}

function edgeText(reasons, count) {
  return `${reasons.filter(Boolean).join("; ") || "no reason"}${count > 1 ? ` ×${count}` : ""}`;
}

function countsText(entered, turns) {
  return `entered ${entered}× · ${turns} turn${turns === 1 ? "" : "s"}`;
}

export class GraphView {
  constructor(container) {
    this.container = container;
    this.graph = null;
    this.cards = new Map();
    this.edges = new Map();
  }

  setGraph(graph) {
    this.graph = graph;
    const names = new Map(graph.nodes.map((node) => [node.id, wrap(node.id)]));
    const final = graph.at(Infinity);
    const most = Math.max(1, ...final.entered.values(), ...final.turns.values());
    const nameW = Math.max(0, ...[...names.values()].flat().map((line) => width(line, FONT)));
    const slotW = width(countsText(most, most), SMALL_FONT);
    const lines = Math.max(1, ...[...names.values()].map((wrapped) => wrapped.length));
    const cardW = Math.ceil(Math.max(MIN_CARD_W, SYMBOL_W + nameW, slotW) + 2 * PAD);
    const cardH = Math.ceil(lines * LINE + 2 * LINE + 2 * PAD);
    this.size = { width: cardW, height: cardH };
    // The gap between cards fits the longest edge label the run will show (also fixed before layout).
    const longestLabel = Math.max(0, ...graph.edges.map((edge) =>
      width(edgeText([...new Set(edge.reasons.map((item) => item.reason))], edge.reasons.length), SMALL_FONT)));
    const gapX = Math.ceil(Math.min(MAX_GAP_X, Math.max(MIN_GAP_X, longestLabel + 16)));
    const columns = Math.max(1, Math.floor((Math.max(this.container.clientWidth, 400) - 2 * MARGIN + gapX) / (cardW + gapX)));
    const place = new Map(graph.nodes.map((node, index) => [node.id, {
      x: MARGIN + (index % columns) * (cardW + gapX),
      y: MARGIN + 20 + Math.floor(index / columns) * (cardH + GAP_Y),
    }]));
    const rows = Math.ceil(graph.nodes.length / columns);
    const totalW = 2 * MARGIN + Math.min(columns, graph.nodes.length) * (cardW + gapX);
    const totalH = MARGIN * 2 + 20 + rows * (cardH + GAP_Y);
    const root = svg("svg", { width: totalW, height: totalH, class: "graph-svg", role: "img", "aria-label": "Dialogue states and verdicts" },
      svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }))));
    this.edges = new Map();
    for (const edge of graph.edges) {
      const group = this.edgeView(edge, place.get(edge.from), place.get(edge.to), cardW, cardH);
      root.append(group.node);
      this.edges.set(edge.key, group);
    }
    this.cards = new Map();
    for (const node of graph.nodes) {
      const { x, y } = place.get(node.id);
      const nameLines = names.get(node.id);
      const symbol = svg("text", { class: "symbol", x: x + PAD, y: y + PAD + 12 }, "○");
      const counts = svg("text", { class: "counts", x: x + PAD, y: y + PAD + lines * LINE + 12 }, countsText(0, 0));
      const card = svg("g", { class: "node", dataset: { state: node.id } },
        svg("rect", { class: "card", x, y, width: cardW, height: cardH, rx: 6 }),
        symbol,
        nameLines.map((line, index) => svg("text", { class: "name", x: x + PAD + SYMBOL_W, y: y + PAD + 12 + index * LINE }, line)),
        counts,
        svg("text", { class: "marker", x: x + PAD, y: y + PAD + (lines + 1) * LINE + 12 }, node.first ? "start" : ""),
        svg("title", {}, node.id));
      root.append(card);
      this.cards.set(node.id, { card, symbol, counts });
    }
    this.container.replaceChildren(root);
  }

  edgeView(edge, from, to, cardW, cardH) {
    let d;
    let labelX;
    let labelY;
    if (edge.from === edge.to) { // a loop over the card's top edge
      const left = from.x + cardW * 0.3;
      const right = from.x + cardW * 0.7;
      d = `M ${left} ${from.y} C ${left} ${from.y - 44}, ${right} ${from.y - 44}, ${right} ${from.y}`;
      labelX = from.x + cardW / 2;
      labelY = from.y - 36;
    } else {
      const start = { x: from.x + cardW / 2, y: from.y + cardH / 2 };
      const end = { x: to.x + cardW / 2, y: to.y + cardH / 2 };
      const sameRow = from.y === to.y;
      const forward = end.x > start.x;
      const a = sameRow ? { x: forward ? from.x + cardW : from.x, y: start.y + (forward ? -8 : 8) } : { x: start.x, y: end.y > start.y ? from.y + cardH : from.y };
      const b = sameRow ? { x: forward ? to.x : to.x + cardW, y: end.y + (forward ? -8 : 8) } : { x: end.x, y: end.y > start.y ? to.y : to.y + cardH };
      const bend = sameRow ? (forward ? -24 : 24) : 0;
      const mid = { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 + bend };
      d = `M ${a.x} ${a.y} Q ${mid.x} ${mid.y} ${b.x} ${b.y}`;
      labelX = mid.x;
      labelY = (a.y + b.y) / 2 + bend / 2 + (forward ? -6 : 14);
    }
    const label = svg("text", { class: "edge-label", x: labelX, y: labelY, "text-anchor": "middle" }, "");
    const title = svg("title", {}, "");
    const node = svg("g", { class: "edge future", dataset: { from: edge.from, to: edge.to } },
      svg("path", { class: "edge-path", d, "marker-end": "url(#arrow)" }), label, title);
    return { node, label, title, edge };
  }

  setCursor(seq) {
    if (!this.graph) return;
    const at = this.graph.at(seq);
    for (const [state, { card, symbol, counts }] of this.cards) {
      const entered = at.entered.get(state) ?? 0;
      const current = at.current === state;
      card.classList.toggle("current", current);
      card.classList.toggle("unvisited", entered === 0 && !current);
      symbol.textContent = current ? "●" : entered ? "✓" : "○";
      counts.textContent = countsText(entered, at.turns.get(state) ?? 0);
      card.dataset.entered = String(entered);
    }
    for (const [key, { node, label, title, edge }] of this.edges) {
      const count = at.traversed.get(key) ?? 0;
      const reasons = at.reasons.get(key) ?? [];
      node.classList.toggle("future", count === 0);
      label.textContent = count ? edgeText(reasons, count) : "";
      title.textContent = `${edge.from} → ${edge.to}: ${edge.reasons.map((item) => item.reason || "no reason").join("; ")}`;
      node.dataset.count = String(count);
    }
  }
}
