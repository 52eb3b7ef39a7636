"""The vocabulary every stage shares, and nothing else.

- ``journal``: the journal record's shape (``EventType``, ``RunKind``, ``CaptureStatus``) and its
  one encoder and timestamp format (SPEC §5.2, §5.3).
- ``layout``: where a run's bundle lives under a root, never outside it (SPEC §5.1).
- ``semconv``: attribute and event names (SPEC §4, docs/conventions.md).
- ``config``, ``log``, ``stop_signal``: settings read from the environment, the one way a module
  makes a logger (every argument redacted), and how a long command stops on a signal.
- ``lazy``: a package's re-exports imported when first used (a command pays for what it uses).

These modules import nothing else of the project, so every stage above (instrument, normalize,
redact, bundle, catalog, replay, the collector and the viewer) can use them.
"""
