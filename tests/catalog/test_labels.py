"""A run's tags, metadata and scores in the catalog (SQLite and PostgreSQL): kept as rows read
them, and filtered by whole items only, whatever characters they hold."""

from __future__ import annotations

import orjson

from otel_session.catalog import RunQuery
from otel_session.catalog.rows import row_of
from otel_session.core import layout

from .conftest import BASE_NS, new_run_id

TRICKY = ['a","b', "vi%", "x_y", 'q\\"', ",", "]"]


def _run(writer, session: str, tags: list[str], metadata: dict[str, str], scores: list[dict]) -> str:
    run_id = new_run_id()
    run = writer.open_run(session_id=session, run_id=run_id, agent="a", created_at_ns=BASE_NS)
    run.append("run_started", {"kind": "live", "agent": "a", "tags": tags, "metadata": metadata}, at_ns=BASE_NS)
    run.append("run_finished", {"status": "ok"}, at_ns=BASE_NS + 1)
    run.close()
    assert writer.force_flush()
    if scores:
        path = run.path / layout.FEEDBACK_FILE
        path.write_bytes(b"".join(orjson.dumps({"kind": "score", **score}) + b"\n" for score in scores))
    return run_id


def test_labels_and_scores_filter_by_whole_items(writer, catalog, root):
    tricky = _run(writer, "s1", TRICKY, {"k": 'v","w', "env": "prod"},
                  [{"name": "helpful", "value": True}, {"name": "helpful", "value": False}, {"name": "grade", "value": "A"}])
    plain = _run(writer, "s2", ["vi", "a"], {"k": "v", "env": "prod"}, [{"name": "accuracy", "value": 0.5}])
    catalog.upsert_sealed([row_of(root, path) for path in sorted((root / "sessions").glob("*/run-*"))])

    def ids(**filters) -> set[str]:
        return {row.run_id for row in catalog.page(RunQuery(**filters)).rows}

    for tag in TRICKY:
        assert ids(tags=(tag,)) == {tricky}, tag
    assert ids(tags=("a",)) == {plain} and ids(tags=("vi",)) == {plain} and ids(tags=("b",)) == set()
    assert ids(tags=("vi", "a")) == {plain} and ids(tags=("vi%", "a")) == set()
    assert ids(metadata=(("k", 'v","w'),)) == {tricky} and ids(metadata=(("k", "v"),)) == {plain}
    assert ids(metadata=(("env", "prod"),)) == {tricky, plain} and ids(metadata=(("env", "pro"),)) == set()
    assert ids(scores=(("helpful", None),)) == {tricky} and ids(scores=(("helpful", "false"),)) == {tricky}
    assert ids(scores=(("helpful", "true"),)) == set() and ids(scores=(("grade", "A"),)) == {tricky}
    assert ids(scores=(("accuracy", "0.5"),)) == {plain}
    row = catalog.rows([f"sessions/s1/{tricky}"])[f"sessions/s1/{tricky}"]
    assert row.tags == tuple(sorted(TRICKY)) and dict(row.metadata) == {"k": 'v","w', "env": "prod"}
    assert row.scores == (("grade", "A", 1, None), ("helpful", "false", 2, 0.5))
