// Compare page: the per-turn facts of two runs (an eval run and a live one, or two eval runs) side by
// side, aligned by turn index; a cell that differs from its twin on the other side is marked.
import { api, enc, fill, h, markReady, showError } from "./dom.js";
import { slotTriad, verdictText } from "./facts-view.js";

const data = document.body.dataset;
const sides = [[data.leftSession, data.leftRun], [data.rightSession, data.rightRun]];

function cells(turn) {
  if (!turn) return ["(no such turn)", "", "", ""];
  const triad = slotTriad(turn);
  const slots = (turn.required_slots_in_state ?? []).join(", ");
  const missing = triad.missing === null ? "unknown" : triad.missing.join(", ") || "none";
  return [
    `${turn.state_before ?? "∅"} → ${turn.state ?? "∅"}`,
    `${slots || "–"} (missing: ${missing})`,
    (turn.repeated_asks ?? []).join(", "),
    verdictText(turn.verdict),
  ];
}

function row(index, left, right) {
  const a = cells(left);
  const b = cells(right);
  const differs = a.map((value, column) => value !== b[column]);
  const cell = (value, column) => h("td", { class: differs[column] ? "differs" : "" }, value);
  return h("tr", { class: differs.some(Boolean) ? "differs" : "same", dataset: { turnIndex: index } },
    h("td", {}, index), a.map(cell), b.map(cell));
}

async function load() {
  const [left, right] = await Promise.all(sides.map(([session, run]) =>
    api(`/api/sessions/${enc(session)}/facts?run_id=${enc(run)}`)));
  const byIndex = (facts) => new Map((facts.turns ?? []).map((turn) => [turn.turn_index, turn]));
  const a = byIndex(left);
  const b = byIndex(right);
  const indexes = [...new Set([...a.keys(), ...b.keys()])].sort((x, y) => x - y);
  const rows = indexes.map((index) => row(index, a.get(index), b.get(index)));
  fill(document.querySelector("#compare tbody"), rows);
  const differing = rows.filter((node) => node.classList.contains("differs")).length;
  document.getElementById("compare-summary").textContent =
    `${indexes.length} turns; ${differing ? `${differing} differ` : "no differences"}.`;
  markReady();
}

load().catch(showError);
