"""``opentelemetry-instrument`` support: the ``otel_session`` instrumentor entry point.

``opentelemetry-instrument python app.py`` loads :class:`OtelSessionInstrumentor` (entry point group
``opentelemetry_instrumentor``, name ``otel_session``), which calls :func:`otel_session.configure`
on the global SDK tracer provider the distro set up: the session span processor (id stamping on
every span, journaling of spans inside runs) and the bundle writer, configured from ``OTEL_SESSION_*``
environment variables. The app then only needs ``otel_session.session()`` / ``run()`` / ``turn()`` …
(or the Flask extension); it never calls ``configure()`` itself. It also taps the ``openai``
client's streams (``openai_streams``): every streamed chunk becomes an ``assistant_delta``.

Disable it like any instrumentor: ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=otel_session``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from otel_session.instrument import openai_streams
from otel_session.instrument._runtime import Recorder, configure

__all__ = ["OtelSessionInstrumentor"]


class OtelSessionInstrumentor(BaseInstrumentor):
    """Installs otel-session recording on a tracer provider (the global one by default).

    Keyword arguments of ``instrument()``: ``tracer_provider``, ``logger_provider``,
    ``bundle_dir``, ``redaction`` (a :class:`~otel_session.RedactionPolicy`), ``writer_limits``;
    each falls back to the environment like :func:`otel_session.configure`.
    """

    _recorder: Recorder | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        OtelSessionInstrumentor._recorder = configure(
            bundle_dir=kwargs.get("bundle_dir"),
            redaction=kwargs.get("redaction"),
            tracer_provider=kwargs.get("tracer_provider"),
            logger_provider=kwargs.get("logger_provider"),
            writer_limits=kwargs.get("writer_limits"),
        )
        openai_streams.install()  # every streamed chunk of the openai client as a delta

    def _uninstrument(self, **kwargs: Any) -> None:
        openai_streams.uninstall()
        recorder, OtelSessionInstrumentor._recorder = OtelSessionInstrumentor._recorder, None
        if recorder is not None:
            recorder.shutdown()
