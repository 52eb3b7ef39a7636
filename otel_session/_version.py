"""The package's version, in one place (pyproject reads it; so does the tracer scope)."""

__version__ = "0.1.0"
