"""One line of ``otel-session sessions``: a run directory as the tolerant reader judges it.

Contract::

    run = ListedRun.of(run_path, root)   # reads the bundle (integrity included); never raises
    run.session_key, run.status_text, run.as_json()

``iter_runs`` lists runs from their manifests and capture files alone, so it would call a bundle
whose journal disagrees with its capture ``complete`` and skip one whose ``run.json`` is broken.
The listing shows what ``verify`` would say of each, and shows the broken ones under their
session directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from otel_session.bundle.read import BundleStatus, read_bundle

__all__ = ["ListedRun"]


@dataclass(frozen=True)
class ListedRun:
    path: Path
    directory: str
    """The session directory, relative to the root (``sessions/<name>``, ``evals/<id>/sessions/<name>``)."""
    session_id: str | None
    run_id: str
    kind: str
    created_at: str
    status: BundleStatus
    problems: tuple[str, ...]
    """Diagnostic codes, errors and warnings."""
    capture_status: str | None
    agent: str | None
    eval_id: str | None
    service: str | None

    @classmethod
    def of(cls, path: Path, root: Path) -> ListedRun:
        bundle = read_bundle(path)
        manifest = bundle.manifest or {}
        return cls(
            path=path,
            directory=path.parent.relative_to(root).as_posix(),
            session_id=manifest.get("session_id"),
            run_id=manifest.get("run_id") or path.name,
            kind=str(manifest.get("kind", "?")),
            created_at=str(manifest.get("created_at", "")),
            status=bundle.status,
            problems=tuple(dict.fromkeys(diagnostic.code.value for diagnostic in bundle.diagnostics)),
            capture_status=(bundle.capture or {}).get("status"),
            agent=manifest.get("agent"),
            eval_id=manifest.get("eval_id"),
            service=manifest.get("service"),
        )

    @property
    def session_key(self) -> str:
        """The session id, or the directory when ``run.json`` cannot say."""
        return self.session_id if self.session_id is not None else f"{self.directory}/ (run.json missing or invalid)"

    @property
    def status_text(self) -> str:
        return f"{self.status.value} ({', '.join(self.problems)})" if self.problems else self.status.value

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "directory": self.directory,
            "kind": self.kind,
            "created_at": self.created_at,
            "status": self.status.value,
            "problems": list(self.problems),
            "capture_status": self.capture_status,
            "agent": self.agent,
            "eval_id": self.eval_id,
            "service": self.service,
        }
