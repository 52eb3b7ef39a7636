"""The otel-session viewer (installed as ``otel_session.viewer``)."""
