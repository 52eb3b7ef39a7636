"""``opentelemetry-instrument`` support: the ``otel_session`` instrumentor entry point.

``opentelemetry-instrument python app.py`` loads :class:`OtelSessionInstrumentor` (entry point group
``opentelemetry_instrumentor``, name ``otel_session``), which calls :func:`otel_session.configure`
on the global SDK tracer provider the distro set up: the session span processor (id stamping on
every span, journaling of spans inside runs) and the bundle writer, configured from ``OTEL_SESSION_*``
environment variables. The app then only needs ``otel_session.session()`` / ``run()`` / ``turn()`` …
(or the Flask extension); it never calls ``configure()`` itself. It also taps the ``openai``
and ``anthropic`` clients' streams (``openai_streams``, ``anthropic_streams``): every streamed chunk
becomes an ``assistant_delta``. A client is tapped when the app imports it (now, if it has), never
imported for the tap (``_on_import``): an app that uses neither does not pay for loading them.

When ``OTEL_TRACES_EXPORTER`` or ``OTEL_LOGS_EXPORTER`` names a plain OTLP exporter (``otlp``,
``otlp_proto_grpc``, ``otlp_proto_http``), it says once, in one warning line, that those spans or
log records leave the process unredacted and names ``otel_session_otlp``, the redacting exporters
(fine as it is when they go to the otel-session collector, which redacts before forwarding).

After every instrumentor has loaded (``opentelemetry_post_instrument`` entry point),
:func:`warn_unloaded_instrumentors` names, in one warning line, each instrumentor whose library is
installed but which could not be imported (a dependency missing, as openai-v2 without ``httpx``),
and what to install: ``opentelemetry-instrument`` itself only says so at debug level, so the app
would run recording nothing, with no error.

Disable it like any instrumentor: ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=otel_session``.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from importlib.metadata import entry_points
from typing import Any

from opentelemetry.environment_variables import OTEL_LOGS_EXPORTER, OTEL_TRACES_EXPORTER
from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts
from opentelemetry.instrumentation.environment_variables import OTEL_PYTHON_DISABLED_INSTRUMENTATIONS
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from otel_session.core.log import log_setting
from otel_session.instrument import anthropic_streams, openai_streams
from otel_session.instrument._log import warn_once
from otel_session.instrument._runtime import Recorder, configure

PLAIN_OTLP = frozenset({"otlp", "otlp_proto_grpc", "otlp_proto_http"})
"""The official exporters' entry point names: what they send is not redacted."""

__all__ = ["PLAIN_OTLP", "OtelSessionInstrumentor", "unloaded_instrumentors", "warn_if_exported_unredacted",
           "warn_unloaded_instrumentors"]


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
        anthropic_streams.install()  # and of the anthropic client
        warn_if_exported_unredacted()

    def _uninstrument(self, **kwargs: Any) -> None:
        openai_streams.uninstall()
        anthropic_streams.uninstall()
        recorder, OtelSessionInstrumentor._recorder = OtelSessionInstrumentor._recorder, None
        if recorder is not None:
            recorder.shutdown()


def warn_if_exported_unredacted() -> None:
    """One warning line (once per process) when the environment exports spans or log records
    through a plain OTLP exporter, naming the redacting one."""
    settings = {variable: os.environ.get(variable, "") for variable in (OTEL_TRACES_EXPORTER, OTEL_LOGS_EXPORTER)}
    plain = [f"{variable}={value}" for variable, value in settings.items()
             if PLAIN_OTLP & {name.strip() for name in value.split(",")}]
    if plain:
        warn_once(
            "plain-otlp",
            "otel_session: %s export unredacted (personal data the bundle hides goes out as recorded); "
            "set otel_session_otlp instead to export them redacted like the bundle, unless they go to "
            "the otel-session collector, which redacts before forwarding", " and ".join(plain),
        )


def unloaded_instrumentors() -> list[tuple[str, str]]:
    """``(entry point, missing module)`` of each instrumentor ``opentelemetry-instrument`` would load
    (not disabled, its library installed) that cannot be imported."""
    disabled = {name.strip() for name in os.environ.get(OTEL_PYTHON_DISABLED_INSTRUMENTATIONS, "").split(",")}
    if "*" in disabled:
        return []
    found = []
    for entry_point in entry_points(group="opentelemetry_instrumentor"):
        if entry_point.name in disabled:
            continue
        try:
            if entry_point.dist is not None and get_dist_dependency_conflicts(entry_point.dist):
                continue  # its library is not installed: nothing to instrument, as expected
            entry_point.load()
        except ModuleNotFoundError as exc:
            found.append((entry_point.name, exc.name or str(exc)))
        except Exception:  # noqa: BLE001 - opentelemetry-instrument logs these itself, with their traceback
            continue
    return found


def warn_unloaded_instrumentors() -> None:
    """One warning naming the instrumentors that could not load and what to install (see the module docstring)."""
    unloaded = unloaded_instrumentors()
    if unloaded:
        named = "; ".join(f"{name} (no module named {module!r}: pip install {module.split('.')[0]})"
                          for name, module in unloaded)
        warn_once("unloaded-instrumentors", "opentelemetry-instrument could not load, so records nothing of: %s",
                  log_setting(named))
