// Integrity is always visible: one badge for the status, one labelled badge per diagnostic.
import { badge, fill, h } from "./dom.js";

export const DIAGNOSTIC_LABELS = {
  missing_capture: "missing capture",
  invalid_capture: "invalid capture",
  invalid_manifest: "invalid manifest",
  seq_gap: "gap",
  count_mismatch: "count mismatch",
  torn_tail: "torn tail",
  garbage_line: "garbage line",
  upstream_drop: "upstream drop",
  reconcile_mismatch: "reconcile mismatch",
};

/** Render {status, diagnostics, capture} into `target`. */
export function renderIntegrity(target, integrity) {
  const parts = [h("span", { class: "muted" }, "integrity"), badge(integrity.status, integrity.status)];
  const failure = integrity.capture?.failure;
  if (integrity.capture?.status === "failed") {
    parts.push(
      h("span", { class: "badge status-failed", "data-label": "failed capture", title: failure?.message ?? "" },
        `failed capture${failure?.code ? `: ${failure.code}` : ""}`),
    );
  }
  for (const diagnostic of integrity.diagnostics ?? []) {
    const label = DIAGNOSTIC_LABELS[diagnostic.code] ?? diagnostic.code;
    const where = diagnostic.seq != null ? ` @seq ${diagnostic.seq}` : diagnostic.line != null ? ` @line ${diagnostic.line}` : "";
    parts.push(
      h("span", { class: `badge diag sev-${diagnostic.severity}`, "data-code": diagnostic.code, title: diagnostic.message },
        `${label}${where}`),
    );
  }
  fill(target, parts);
  target.dataset.status = integrity.status;
}
