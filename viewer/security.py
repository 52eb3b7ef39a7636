"""Who may talk to the viewer, and the headers every answer carries.

* Without a token (the default, loopback only) requests must name a loopback host in ``Host``,
  so a page on another site cannot reach the viewer through DNS rebinding.
* With a token (``--token`` or ``OTEL_SESSION_VIEWER_TOKEN``; required to bind beyond loopback)
  every request carries it: ``Authorization: Bearer <token>``, or the ``otel_session_token``
  cookie (HttpOnly, SameSite=Strict) that a first visit to any page with ``?token=<token>`` sets
  before redirecting to the same URL without it.
* Every response carries a strict Content-Security-Policy (scripts and styles from this origin
  only, no inline code, no framing), ``nosniff`` and ``no-referrer``.
* The only writes, ``POST …/feedback`` and ``POST …/scores``, must be ``application/json`` from this origin.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlencode, urlsplit

from flask import Flask, Response, current_app, redirect, request

from .errors import ApiError

__all__ = ["CONTENT_SECURITY_POLICY", "TOKEN_COOKIE", "init_app", "is_loopback_host"]

TOKEN_COOKIE = "otel_session_token"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); never for other DNS names."""
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _request_hostname() -> str:
    return urlsplit(f"//{request.host}").hostname or ""


def _presented_token() -> str | None:
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return header[len("Bearer ") :].strip()
    return request.cookies.get(TOKEN_COOKIE)


def _check_request() -> Response | None:
    token: str | None = current_app.config.get("TOKEN")
    if not token:
        if not is_loopback_host(_request_hostname()):
            raise ApiError(403, "forbidden_host", "without a token the viewer answers loopback host names only")
        return None
    query_token = request.args.get("token")
    if query_token is not None and request.method == "GET" and not request.path.startswith("/api/"):
        if not hmac.compare_digest(query_token.encode(), token.encode()):
            raise ApiError(401, "unauthorized", "wrong token")
        remaining = [(key, value) for key, value in request.args.items(multi=True) if key != "token"]
        response = redirect(request.path + (f"?{urlencode(remaining)}" if remaining else ""))
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", secure=request.is_secure)
        return response
    presented = _presented_token()
    if presented is None or not hmac.compare_digest(presented.encode(), token.encode()):
        raise ApiError(401, "unauthorized", "this viewer needs its token (Authorization: Bearer, or ?token= once)")
    return None


def _check_write() -> None:
    if request.method not in ("POST", "PUT", "PATCH", "DELETE"):
        return
    if not request.is_json:
        raise ApiError(400, "bad_request", "send application/json")
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise ApiError(403, "forbidden_origin", "writes are accepted from this viewer's own pages only")


def _before_request() -> Response | None:
    response = _check_request()
    if response is None:
        _check_write()
    return response


def _secure_headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers.setdefault("Cache-Control", "no-store")
    return response


def init_app(app: Flask) -> None:
    app.before_request(_before_request)
    app.after_request(_secure_headers)
