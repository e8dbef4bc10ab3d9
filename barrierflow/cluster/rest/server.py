"""The JobMaster's REST endpoint: JSON about one running job, and its actions, in Flink's shapes.

Its routes are declared once, in routes.py (path, method, handler, schema, summary); the
dispatcher's table here and the OpenAPI 3.0 description at `/openapi.json` (openapi.py)
are generated from them. `/metrics` (Prometheus' text, metrics/prometheus.py) and the
dashboard's files (dashboard_files.py) are answered by the HTTP handler itself.

Anything else is a 404 (405 for a method a path does not take) with Flink's error body,
`{"errors": ["..."]}`. The server answers from HTTP threads, which only read the
immutable `JobView` (jobmaster/views.py) and `MetricsSnapshot` the JobMaster thread last
published and act through `JobActions` (job_actions.py, whose calls post to the JobMaster):
they never touch the JobMaster's own state.

The port comes from `JobSettings.rest_port` or, when that is None, the environment
variable `BARRIERFLOW_REST_PORT`: unset or `0` picks a free port (logged at job
start and shown by `JobClient`), a number from 1 to 65535 is that port, and `off`
disables the endpoint. It listens on the driver's bind host: loopback when the Spark
master is local.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from barrierflow.cluster.jobmaster.views import JobView
from barrierflow.cluster.metrics import prometheus as metrics_prometheus
from barrierflow.cluster.metrics.view import MetricsSnapshot
from barrierflow.cluster.rest import openapi
from barrierflow.cluster.rest.actions import JobControl, RestError
from barrierflow.cluster.rest.dashboard_files import serve_dashboard
from barrierflow.cluster.rest.routes import DECLARED, Declared, RawBody, RestRequest, RouteHandler
from barrierflow.cluster.rest.uri_redaction import redact
from barrierflow.errors import ConfigurationError

__all__ = [
    "REST_PORT_VARIABLE",
    "TOKEN_ROUTES",
    "JobControl",
    "RawBody",
    "RestRequest",
    "RestServer",
    "Route",
    "allowed_methods",
    "resolve_rest_port",
    "route",
    "routes",
]

log = logging.getLogger(__name__)

REST_PORT_VARIABLE = "BARRIERFLOW_REST_PORT"
_DISABLED = ("off", "false", "no", "none", "disabled")


def resolve_rest_port(setting: int | str | None, environ: Mapping[str, str]) -> int | None:
    """The port to listen on (0: any free one), or None when the endpoint is off.

    >>> resolve_rest_port(None, {}), resolve_rest_port(None, {"BARRIERFLOW_REST_PORT": "8081"})
    (0, 8081)
    >>> resolve_rest_port("off", {"BARRIERFLOW_REST_PORT": "8081"}) is None
    True
    """
    value = setting if setting is not None else environ.get(REST_PORT_VARIABLE, "").strip()
    if value == "":
        return 0
    if isinstance(value, str) and value.lower() in _DISABLED:
        return None
    try:
        port = int(value)
    except (TypeError, ValueError):
        port = -1
    if not 0 <= port <= 65535:
        raise ConfigurationError(
            f"the REST port ({REST_PORT_VARIABLE}) must be 0 (any free port), 1-65535 or "
            f"'off', got {value!r}"
        )
    return port


_PARAMETER_PATTERNS = {"checkpoint_id": r"\d{1,18}", "vertex_id": r"\d{1,9}"}
"""What a path parameter matches (others: one path segment). A longer number is a 404."""


@dataclass(frozen=True)
class Route:
    """One route: a method, an OpenAPI path template ("/jobs/{job_id}") and its handler."""

    method: str
    template: str
    handler: RouteHandler | None
    """None: answered before the table is consulted (`/openapi.json`, in `route`)."""

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compile(self.template)


def _compile(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{(\w+)\}", template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"({_PARAMETER_PATTERNS.get(part, '[^/]+')})"
        for i, part in enumerate(parts)
    )
    return re.compile(regex)


def _with_token(handler: RouteHandler | None) -> RouteHandler | None:
    """A route that serves only with the job's token (logs and the exception history carry
    tracebacks, paths and whatever user code logged): 401 without, 403 wrong, 403 on an
    endpoint that has no token."""
    if handler is None:
        return None

    def guarded(view: JobView, control: Any, request: RestRequest, *groups: str) -> Any:
        if control is None:
            raise RestError(
                HTTPStatus.FORBIDDEN, "this endpoint has no token: it serves no logs or exceptions"
            )
        control.check_token(request.authorization)
        return handler(view, control, request, *groups)

    return guarded


def _token_get(route: Declared) -> bool:
    return route.token and route.method == "GET"


_ROUTES: list[Route] = [
    Route(r.method, r.template, _with_token(r.handler) if _token_get(r) else r.handler)
    for r in DECLARED
    if r.in_table
]
"""The dispatcher's table, generated from routes.DECLARED: every route but `/metrics`
(Prometheus' text, answered by the HTTP handler itself)."""

TOKEN_ROUTES = frozenset(r.template for r in DECLARED if _token_get(r))
"""The GETs that need the job's token (`_with_token`); the spec marks them so."""


def routes() -> list[tuple[str, str]]:
    """(method, path template) of every JSON route, for the spec and its sync test."""
    return [(r.method, r.template) for r in _ROUTES]


def allowed_methods(path: str) -> list[str]:
    """The methods `path` answers to (GET implies HEAD); empty when it names nothing."""
    path = _clean(path)
    methods = [r.method for r in _ROUTES if r.pattern.fullmatch(path)]
    return sorted(set(methods + (["HEAD"] if "GET" in methods else [])))


def route(
    view: JobView | None,
    path: str,
    *,
    method: str = "GET",
    body: bytes | None = None,
    authorization: str | None = None,
    control: JobControl | None = None,
    metrics: MetricsSnapshot | None = None,
) -> tuple[int, Any]:
    """The status and body (JSON, or a RawBody) of a request (pure but for `control`, which
    acts on the job, and the log routes, which read the job's log folder: tests call it
    without a socket). GETs are open but for logs and exceptions (TOKEN_ROUTES); actions
    need `control`'s token. Credentials in any URI of a JSON body are taken out."""
    request = RestRequest(method, path, body, authorization, metrics)
    clean = _clean(path)
    get = "GET" if method == "HEAD" else method
    if get != "GET" and control is None:
        return HTTPStatus.METHOD_NOT_ALLOWED, {"errors": ["read-only: use GET"]}
    if clean == "/openapi.json" and get == "GET":
        return HTTPStatus.OK, openapi.openapi_spec(view.job_id if view is not None else None)
    if view is None:
        return HTTPStatus.SERVICE_UNAVAILABLE, {"errors": ["the job is starting"]}
    matched = False
    for candidate in _ROUTES:
        match = candidate.pattern.fullmatch(clean)
        if match is None:
            continue
        matched = True
        if candidate.method != get or candidate.handler is None:
            continue  # a None handler (`/openapi.json`) was answered above
        try:
            status, body = candidate.handler(view, control, request, *match.groups())
        except RestError as refused:
            return refused.status, {"errors": [str(refused)]}
        return status, body if isinstance(body, RawBody) else redact(body)
    if matched:
        allowed = ", ".join(allowed_methods(path))
        return HTTPStatus.METHOD_NOT_ALLOWED, {"errors": [f"{method} {clean}: use {allowed}"]}
    return HTTPStatus.NOT_FOUND, {"errors": [f"not found: {clean}"]}


def _clean(path: str) -> str:
    return unquote(urlsplit(path).path).rstrip("/") or "/"


REST_HOSTS_VARIABLE = "BARRIERFLOW_REST_HOSTS"
"""More names the endpoint answers to in the Host header (comma-separated; e.g. the name a
reverse proxy forwards), beside its bind address, loopback, this machine's names and any IP
address."""
MAX_CONNECTIONS = 32
"""HTTP connections served at once (a thread each); one more is closed at once."""
CLOSE_GRACE_S = 5.0
"""How long closing the endpoint waits for the answers being written."""

REQUEST_TIMEOUT_S = 10.0
"""How long a connection may take to send its request: a client that trickles holds its
thread no longer."""


def allowed_host_names(bind_host: str, environ: Mapping[str, str]) -> frozenset[str]:
    """The names a request's Host header may give (lower case), besides IP addresses.

    >>> sorted(allowed_host_names("127.0.0.1", {"BARRIERFLOW_REST_HOSTS": "Proxy.example"}))[:3]
    ['127.0.0.1', 'localhost', 'proxy.example']
    """
    names = {bind_host, "localhost", socket.gethostname(), socket.getfqdn()}
    names.update(n.strip() for n in environ.get(REST_HOSTS_VARIABLE, "").split(","))
    return frozenset(n.lower() for n in names if n)


def host_allowed(host_header: str | None, names: frozenset[str]) -> bool:
    """Whether a request's Host header names this endpoint: an IP address (the page was
    loaded from that address, so it is this server's origin), or one of `names`. A name
    elsewhere is a DNS rebinding attempt (a page of another site whose name now resolves to
    this address, e.g. loopback) and is refused; no Host header at all (an HTTP/1.0 client,
    never a browser) passes.

    >>> names = frozenset({"localhost", "driver-1"})
    >>> [host_allowed(h, names) for h in ("127.0.0.1:8081", "[::1]:8081", "LOCALHOST:1",
    ...                                   "driver-1", "evil.example:8081", "")]
    [True, True, True, True, False, False]
    """
    if host_header is None:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    if not host:
        return False
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return host in names


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS at once: one more is closed at once
    with a log line (a line per hundred in a flood), so nobody makes threads without bound."""

    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._turned_away = 0
        self._answering = 0
        """Connections taken and not yet answered (guarded by `_answered`)."""
        self._answered = threading.Condition()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._turned_away += 1  # the serving thread only
            if self._turned_away == 1 or self._turned_away % 100 == 0:
                log.warning("REST endpoint closed a connection from %s at once: %d served "
                            "already (%d closed so far)", client_address[0], MAX_CONNECTIONS,
                            self._turned_away)  # fmt: skip
            self.shutdown_request(request)
            return
        with self._answered:
            self._answering += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done()

    def _done(self) -> None:
        self._slots.release()
        with self._answered:
            self._answering -= 1
            self._answered.notify_all()

    def wait_until_answered(self, timeout_s: float) -> bool:
        """Wait (at most `timeout_s`) until every connection taken so far was answered: the
        threads are daemons, so a process that ends right after `close` would otherwise cut
        an answer off (a stop's result, read as the job ends)."""
        with self._answered:
            return self._answered.wait_for(lambda: self._answering == 0, timeout_s)


class RestServer:
    """Serves `route()` over HTTP on a ThreadingHTTPServer. Thread-safe.

    Guarantees that HTTP threads see only what `get_view` returns (the JobMaster's
    last published `JobView`) and act on the job only through `control`; assumes
    `get_view` is a plain attribute read. Without `control` the endpoint is read-only.
    """

    def __init__(
        self,
        host: str,
        port: int,
        get_view: Callable[[], JobView | None],
        control: JobControl | None = None,
        get_metrics: Callable[[], MetricsSnapshot | None] | None = None,
    ) -> None:
        """`get_metrics`: the JobMaster's last published metrics (None: no metrics routes;
        `/metrics` then serves the job and checkpoint figures only)."""
        read_metrics = get_metrics or (lambda: None)

        class Handler(_Handler):
            view = staticmethod(get_view)
            metrics = staticmethod(read_metrics)
            registry = metrics_prometheus.metrics_registry(get_view, read_metrics)
            job_control = control
            host_names = allowed_host_names(host, os.environ)

        self.control = control
        self._server = _BoundedHTTPServer((host, port), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="rest",
            daemon=True,
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    def close(self) -> None:
        """Stop serving and release the port; waits for the serving thread, and for the
        answers being written (at most CLOSE_GRACE_S)."""
        self._server.shutdown()
        self._server.wait_until_answered(CLOSE_GRACE_S)
        self._server.server_close()
        self._thread.join(5)


MAX_BODY_BYTES = 64 * 1024
"""A request body larger than this is refused (an action's body is a few fields)."""


class _Handler(BaseHTTPRequestHandler):
    server_version = "barrierflow"
    view: Callable[[], JobView | None]
    metrics: Callable[[], MetricsSnapshot | None]
    registry: Any
    """The prometheus-client CollectorRegistry of this server (its own, never the global)."""
    job_control: JobControl | None
    host_names: frozenset[str]
    timeout = REQUEST_TIMEOUT_S

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def do_POST(self) -> None:
        self._answer(send_body=True)

    do_PATCH = do_PUT = do_DELETE = do_POST

    def _answer(self, *, send_body: bool) -> None:
        if not host_allowed(self.headers.get("Host"), self.host_names):
            self.close_connection = True
            message = f"this endpoint does not answer to the host {self.headers.get('Host')!r}"
            self._send(HTTPStatus.MISDIRECTED_REQUEST, {"errors": [message]}, send_body)
            return
        if serve_dashboard(self, send_body=send_body):  # GET "/" and "/dashboard/<file>"
            return
        if _clean(self.path) == "/metrics" and self.command in ("GET", "HEAD"):
            self._answer_prometheus(send_body)
            return
        headers: dict[str, str] = {}
        try:
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
                body = {"errors": [f"the request body is larger than {MAX_BODY_BYTES} bytes"]}
                self.close_connection = True
            else:
                status, body = route(
                    self.view(),
                    self.path,
                    method=self.command,
                    body=self.rfile.read(length) if length > 0 else None,
                    authorization=self.headers.get("Authorization"),
                    control=self.job_control,
                    metrics=self.metrics(),
                )
            if status == HTTPStatus.METHOD_NOT_ALLOWED:
                allowed = allowed_methods(self.path) if self.job_control else []
                headers["Allow"] = ", ".join(allowed) or "GET, HEAD"
        except Exception as error:  # a bug here must not kill the server thread silently
            log.warning("REST request %s %s failed", self.command, self.path, exc_info=True)
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, {"errors": [str(error)]}
        self._send(status, body, send_body, headers)

    def _answer_prometheus(self, send_body: bool) -> None:
        try:
            data = metrics_prometheus.render(self.registry)
        except Exception as error:  # a bug here must not kill the server thread silently
            log.warning("REST request %s /metrics failed", self.command, exc_info=True)
            self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"errors": [str(error)]}, send_body)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", metrics_prometheus.CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server refuses itself (a bad request line, an unknown method, a header
        too long) gets Flink's JSON error body too, never an HTML page."""
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "error"
        if code == HTTPStatus.NOT_IMPLEMENTED:  # a method no route takes
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command}: use GET"
        self.close_connection = True
        send_body = self.command != "HEAD" and code >= 200 and code not in (204, 304)
        self._send(code, {"errors": [message or phrase]}, send_body)

    def _send(
        self,
        status: int,
        body: Any,
        send_body: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        if isinstance(body, RawBody):
            data, content_type = body.data, body.content_type
        else:
            data, content_type = json.dumps(body).encode(), "application/json; charset=utf-8"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("REST %s: " + format, self.address_string(), *args)
