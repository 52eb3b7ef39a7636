"""JSON errors of the viewer API: ``{"error": code, "message": text}`` with 400/401/404/409."""

from __future__ import annotations

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

__all__ = ["ApiError", "init_app"]


class ApiError(Exception):
    """An error answered as JSON. ``code`` is stable and machine-readable; ``message`` explains."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def response(self) -> Response:
        response = jsonify(error=self.code, message=self.message)
        response.status_code = self.status
        return response


def _http_error(exc: HTTPException) -> Response | HTTPException:
    """Answer API routes with JSON; pages keep Flask's plain error pages."""
    if not request.path.startswith("/api/"):
        return exc
    code = (exc.name or "error").lower().replace(" ", "_")
    return ApiError(exc.code or 500, code, exc.description or exc.name).response()


def init_app(app: Flask) -> None:
    app.register_error_handler(ApiError, lambda exc: exc.response())
    app.register_error_handler(HTTPException, _http_error)
