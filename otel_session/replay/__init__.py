"""What a bundle means: replay state, per-turn session facts, run resolution and latency.

- ``reduce``: ``replay_state(events, seq)`` and ``Replayer`` (checkpoints every 256 events), the
  twin of ``viewer/static/reducer.js`` (SPEC §7.1); built from ``fold`` (the reducer's rules),
  ``replayer`` (seeks in memory) and ``canonical`` (the byte-exact JSON both reducers write).
- ``facts``: ``build_session_facts(bundle_read)`` and the session-wide facts (SPEC §7.2).
- ``resolve``: ``resolve_run(root, session_id, run_id=None)`` (SPEC §7.3).
- ``latency``: voice latency per turn, p50/p95 per run, slow turns.
- ``listing``: what ``otel-session sessions`` prints of a run.
- ``index`` (with ``checkpoints`` and ``turns``): what a sealed run's reader keeps so that it reads
  only what it shows: a seek index, reducer checkpoints, facts, integrity, turn summaries.

Reads bundles (``otel_session.bundle``); writes nothing into them. ``index`` keeps derived, always
rebuildable files of sealed runs under ``<root>/.index/replay/``.
"""
