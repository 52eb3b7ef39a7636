"""The otel-session OTLP collector (installed as ``otel_session.collector``)."""
