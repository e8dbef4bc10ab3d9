"""The web dashboard's static files: served from the package's `dashboard/` folder only.

    GET /                      the dashboard's page (dashboard/index.html)
    GET /dashboard/<file>      one file of that folder (app.js, style.css, ...)

A name is looked up among the folder's own files, never joined onto a path: `..`, a
sub-folder, an encoded slash or an unknown name is a 404 with the endpoint's JSON error
body, so nothing outside the folder is ever read. The files are the installed package's
(package data in pyproject.toml), read at each request: small, and a page reloaded
after an upgrade sees the new ones. Everything else (`/jobs/...`) is the JSON routes'.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["DASHBOARD_FOLDER", "StaticAnswer", "serve_dashboard", "static_answer"]

DASHBOARD_FOLDER = Path(__file__).with_name("dashboard")
"""The package folder whose files the dashboard serves."""

PREFIX = "/dashboard/"

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
"""The kinds of file served; a file of another kind in the folder is not served."""

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'"
)
"""The page loads nothing from elsewhere (no CDN) and runs no inline script."""


@dataclass(frozen=True)
class StaticAnswer:
    """A response to a dashboard path: its status, content type and body."""

    status: int
    content_type: str
    body: bytes


def static_answer(path: str, folder: Path = DASHBOARD_FOLDER) -> StaticAnswer | None:
    """The answer to a GET of `path` (a request target, query allowed), or None when the
    path is not the dashboard's (the JSON routes answer it).

    >>> static_answer("/jobs") is None
    True
    >>> static_answer("/").content_type
    'text/html; charset=utf-8'
    >>> int(static_answer("/dashboard/../server.py").status)
    404
    """
    target = urlsplit(path).path
    if target in ("", "/", "/index.html"):
        return _file(folder, "index.html")
    if not target.startswith(PREFIX):
        return None
    return _file(folder, unquote(target[len(PREFIX) :]))


def _file(folder: Path, name: str) -> StaticAnswer:
    kind = CONTENT_TYPES.get(Path(name).suffix.lower()) if name else None
    served = {entry.name: entry for entry in _entries(folder)}
    entry = served.get(name)
    if kind is None or entry is None or entry.resolve().parent != folder.resolve():
        return _not_found(name)
    try:
        data = entry.read_bytes()
    except OSError:
        return _not_found(name)
    return StaticAnswer(HTTPStatus.OK, kind, data)


def _entries(folder: Path) -> list[Path]:
    """The plain files directly in `folder` (no sub-folders, no links out of it)."""
    try:
        return [entry for entry in folder.iterdir() if entry.is_file()]
    except OSError:
        return []


def _not_found(name: str) -> StaticAnswer:
    body = {"errors": [f"not found: the dashboard has no file {name!r}"]}
    return StaticAnswer(HTTPStatus.NOT_FOUND, "application/json; charset=utf-8", _json(body))


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


def serve_dashboard(handler: Any, *, send_body: bool) -> bool:
    """Answer the handler's GET or HEAD if its path is the dashboard's; False otherwise (the
    caller routes it). `handler` is the REST server's BaseHTTPRequestHandler."""
    if handler.command not in ("GET", "HEAD"):
        return False
    found = static_answer(handler.path)
    if found is None:
        return False
    handler.send_response(found.status)
    handler.send_header("Content-Type", found.content_type)
    handler.send_header("Content-Length", str(len(found.body)))
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("X-Content-Type-Options", "nosniff")
    handler.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
    handler.end_headers()
    if send_body:
        handler.wfile.write(found.body)
    return True
