"""The JobMaster's REST endpoint: read-only JSON about one running job, in Flink's shapes.

    GET /jobs                                            the job's id and state
    GET /jobs/overview                                   name, state, start time, attempt
    GET /jobs/<job_id>                                   state, attempt, vertices, parallelism
    GET /jobs/<job_id>/checkpoints                       counts, summary, latest, history
    GET /jobs/<job_id>/checkpoints/config                the checkpointing settings
    GET /jobs/<job_id>/checkpoints/details/<id>          one checkpoint, every subtask
    GET /jobs/<job_id>/checkpoints/details/<id>/subtasks/<vertex_id>   one vertex's subtasks

Anything else is a 404 (405 for other methods) with Flink's error body,
`{"errors": ["..."]}`. The server answers from HTTP threads, which only read the
immutable `JobView` the JobMaster thread last published: they never touch the
JobMaster's own state.

The port comes from `JobSettings.rest_port` or, when that is None, the environment
variable `BARRIERFLOW_REST_PORT`: unset or `0` picks a free port (logged at job
start and shown by `JobClient`), a number from 1 to 65535 is that port, and `off`
disables the endpoint. It listens on the driver's bind host: loopback when the Spark
master is local.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from barrierflow.checkpoint.stats import CheckpointStatsSnapshot
from barrierflow.cluster import rest_json
from barrierflow.errors import ConfigurationError

__all__ = [
    "REST_PORT_VARIABLE",
    "JobView",
    "RestServer",
    "VertexView",
    "resolve_rest_port",
    "route",
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


@dataclass(frozen=True)
class VertexView:
    """A vertex of the job graph as the endpoint shows it."""

    vertex_id: int
    name: str
    parallelism: int
    operators: tuple[tuple[str, str], ...] = ()
    """(uid, name) of each chained operator."""


@dataclass(frozen=True)
class JobView:
    """What the endpoint shows of one job at one moment. Built by the JobMaster thread;
    immutable, so HTTP threads read it without locks."""

    job_id: str
    name: str
    state: str
    attempt: int
    start_ms: int
    published_ms: int
    vertices: tuple[VertexView, ...]
    checkpoints: CheckpointStatsSnapshot
    checkpoint_config: dict[str, Any] = field(default_factory=dict)
    restored_from: int | None = None


class _NotFound(Exception):
    pass


def _job(view: JobView, job_id: str) -> JobView:
    if job_id != view.job_id:
        raise _NotFound(f"job {job_id} not found; this endpoint serves job {view.job_id}")
    return view


def _checkpoint(view: JobView, job_id: str, checkpoint_id: str) -> dict[str, Any]:
    stats = _job(view, job_id).checkpoints.checkpoint(int(checkpoint_id))
    if stats is None:
        raise _NotFound(
            f"checkpoint {checkpoint_id} of job {job_id} is not in the statistics history "
            "(it keeps the newest checkpoints; `barrierflow checkpoints` shows older ones)"
        )
    return rest_json.checkpoint_json(stats, details=True)


def _vertex(view: JobView, job_id: str, checkpoint_id: str, vertex_id: str) -> dict[str, Any]:
    tasks = _checkpoint(view, job_id, checkpoint_id)["tasks"]
    if vertex_id not in tasks:
        raise _NotFound(f"checkpoint {checkpoint_id} of job {job_id} has no vertex {vertex_id}")
    return tasks[vertex_id]


_ROUTES: list[tuple[re.Pattern[str], Callable[..., Any]]] = [
    (re.compile(r"/jobs"), lambda v: {"jobs": [{"id": v.job_id, "status": v.state}]}),
    (re.compile(r"/jobs/overview"), lambda v: {"jobs": [rest_json.job_overview_json(v)]}),
    (re.compile(r"/jobs/([^/]+)"), lambda v, j: rest_json.job_json(_job(v, j))),
    (
        re.compile(r"/jobs/([^/]+)/checkpoints"),
        lambda v, j: rest_json.checkpoints_json(_job(v, j).checkpoints),
    ),
    (re.compile(r"/jobs/([^/]+)/checkpoints/config"), lambda v, j: _job(v, j).checkpoint_config),
    (re.compile(r"/jobs/([^/]+)/checkpoints/details/(\d+)"), _checkpoint),
    (re.compile(r"/jobs/([^/]+)/checkpoints/details/(\d+)/subtasks/(\d+)"), _vertex),
]


def route(view: JobView | None, path: str) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a GET of `path` (pure: tests call it without a socket)."""
    path = unquote(urlsplit(path).path).rstrip("/") or "/"
    if view is None:
        return HTTPStatus.SERVICE_UNAVAILABLE, {"errors": ["the job is starting"]}
    for pattern, handler in _ROUTES:
        match = pattern.fullmatch(path)
        if match is not None:
            try:
                return HTTPStatus.OK, handler(view, *match.groups())
            except _NotFound as missing:
                return HTTPStatus.NOT_FOUND, {"errors": [str(missing)]}
    return HTTPStatus.NOT_FOUND, {"errors": [f"not found: {path}"]}


class RestServer:
    """Serves `route()` over HTTP on a ThreadingHTTPServer. Thread-safe.

    Guarantees that HTTP threads see only what `get_view` returns (the JobMaster's
    last published `JobView`); assumes `get_view` is a plain attribute read.
    """

    def __init__(self, host: str, port: int, get_view: Callable[[], JobView | None]) -> None:
        class Handler(_Handler):
            view = staticmethod(get_view)

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
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
        """Stop serving and release the port; waits for the serving thread."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server_version = "barrierflow"
    view: Callable[[], JobView | None]

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, *, send_body: bool) -> None:
        try:
            status, body = route(self.view(), self.path)
        except Exception as error:  # a bug here must not kill the server thread silently
            log.warning("REST request %s failed", self.path, exc_info=True)
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, {"errors": [str(error)]}
        self._send(status, body, send_body)

    def _refuse(self) -> None:
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            {"errors": ["read-only: use GET"]},
            True,
            {"Allow": "GET, HEAD"},
        )

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

    def _send(
        self,
        status: int,
        body: dict[str, Any],
        send_body: bool,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if send_body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("REST %s: " + format, self.address_string(), *args)
