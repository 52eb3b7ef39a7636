// The run's dialogue-state graph, as data: states as nodes, transition verdicts as edges with their
// reasons, and what the cursor has reached (counts, current state).
//
//   const graph = buildGraph(events)    // from the whole journal: the layout never changes on seek
//   graph.nodes: [{id, first: bool}]    // first-visit order; `first` marks the start state
//   graph.edges: [{key, from, to, reasons: [{seq, reason}]}]
//   const at = graph.at(seq)            // {current, entered: Map(state → n), turns: Map(state → n),
//                                       //  traversed: Map(edge key → n), reasons: Map(edge key → [reason])}
//
// A state is entered when the first turn starts in it and on every verdict that leads to it; turns
// counts the turns that started in it.

function payloadOf(event) {
  return event.payload && typeof event.payload === "object" ? event.payload : {};
}

function text(value) {
  return typeof value === "string" && value ? value : null;
}

export function buildGraph(events) {
  const nodes = new Map();
  const edges = new Map();
  const steps = []; // [{seq, kind: "turn"|"verdict"|"state", state?, edge?, reason?}]
  const node = (id) => {
    if (id && !nodes.has(id)) nodes.set(id, { id, first: nodes.size === 0 });
  };
  for (const event of events) {
    const payload = payloadOf(event);
    if (event.type === "turn_started" || event.type === "turn_finished") {
      const state = text(payload.state);
      node(state);
      if (state) steps.push({ seq: event.seq, kind: event.type === "turn_started" ? "turn" : "state", state });
    } else if (event.type === "transition_verdict") {
      const from = text(payload.from);
      const to = text(payload.to);
      if (!from || !to) continue;
      node(from);
      node(to);
      const key = `${from}\u0000${to}`;
      if (!edges.has(key)) edges.set(key, { key, from, to, reasons: [] });
      const reason = text(payload.reason) ?? "";
      edges.get(key).reasons.push({ seq: event.seq, reason });
      steps.push({ seq: event.seq, kind: "verdict", edge: key, state: to, reason });
    }
  }
  return {
    nodes: [...nodes.values()],
    edges: [...edges.values()],
    at(seq) {
      const entered = new Map();
      const turns = new Map();
      const traversed = new Map();
      const reasons = new Map();
      let current = null;
      const bump = (map, key) => map.set(key, (map.get(key) ?? 0) + 1);
      for (const step of steps) {
        if (step.seq > seq) break;
        if (step.kind === "turn") {
          if (current !== step.state) bump(entered, step.state);
          bump(turns, step.state);
        } else if (step.kind === "verdict") {
          bump(entered, step.state);
          bump(traversed, step.edge);
          if (!reasons.has(step.edge)) reasons.set(step.edge, []);
          if (step.reason && !reasons.get(step.edge).includes(step.reason)) reasons.get(step.edge).push(step.reason);
        } else if (current !== step.state) {
          bump(entered, step.state);
        }
        current = step.state;
      }
      return { current, entered, turns, traversed, reasons };
    },
  };
}
