"""Errors: JSON ``{"error": code, "message": text}`` on the API, an HTML page everywhere else.

Both carry the HTTP status (400/401/403/404/409). A page's error says what is missing at the top,
above anything else, so a mistyped session or run id is never an empty page answered with 200.
"""

from __future__ import annotations

from flask import Flask, Response, jsonify, render_template, request
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
        if not request.path.startswith("/api/"):
            return _page(self.status, self.code, self.message)
        response = jsonify(error=self.code, message=self.message)
        response.status_code = self.status
        return response


def _page(status: int, code: str, message: str) -> Response:
    response = Response(render_template("error.html", status=status, code=code, message=message), mimetype="text/html")
    response.status_code = status
    return response


def _http_error(exc: HTTPException) -> Response:
    code = (exc.name or "error").lower().replace(" ", "_")
    return ApiError(exc.code or 500, code, exc.description or exc.name).response()


def init_app(app: Flask) -> None:
    app.register_error_handler(ApiError, lambda exc: exc.response())
    app.register_error_handler(HTTPException, _http_error)
