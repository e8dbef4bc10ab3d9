"""Every route of the job's REST endpoint, declared once: path, method, handler, response
schema and summary.

The dispatcher's table (server.py) and the OpenAPI description served at `/openapi.json`
(openapi.py) are both generated from `DECLARED`; a test keeps the three in step. A new route
is one `Declared` entry here (and its body's schema in openapi.py, if it has a new one).
Handlers read only the JobMaster's read models (jobmaster/views.py) and act only through
`JobControl` (the `JobActions` interface this layer declares); they never touch the
JobMaster's own state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from barrierflow.cluster.jobmaster.views import JobView, VertexView
from barrierflow.cluster.metrics import json_bodies as metrics_json
from barrierflow.cluster.metrics.view import MetricsSnapshot
from barrierflow.cluster.rest import actions as rest_actions
from barrierflow.cluster.rest import bodies as rest_json
from barrierflow.cluster.rest import logs as rest_logs
from barrierflow.cluster.rest.actions import RestError

__all__ = [
    "DECLARED",
    "Declared",
    "QueryParameter",
    "RawBody",
    "Response",
    "RestRequest",
    "RouteHandler",
]

RouteHandler = Callable[..., Any]
"""A route's handler: (view, control, request, *path parameters) -> (status, body)."""


@dataclass(frozen=True)
class RestRequest:
    """One request as a handler sees it: plain values, no socket."""

    method: str
    path: str
    """The request target, with its query string."""
    body: bytes | None = None
    authorization: str | None = None
    """The Authorization header, if any."""
    metrics: MetricsSnapshot | None = None
    """The job's metrics as last published (None: the endpoint has none)."""


@dataclass(frozen=True)
class RawBody:
    """A body that is not JSON (a log file's text, a dashboard file): sent as it is."""

    data: bytes
    content_type: str


@dataclass(frozen=True)
class Response:
    """A route's successful answer, as the OpenAPI description documents it."""

    description: str
    schema: str | None = None
    """A component schema's name (openapi.py); None: any JSON object, or any text."""
    status: int = 200
    text: bool = False
    """A `text/plain` body instead of JSON."""


@dataclass(frozen=True)
class QueryParameter:
    """An optional query parameter of a route."""

    name: str
    schema: dict[str, Any]
    description: str | None = None


@dataclass(frozen=True)
class Declared:
    """One route, declared once."""

    method: str
    template: str
    """The OpenAPI path template, e.g. "/jobs/{job_id}"."""
    summary: str
    response: Response
    handler: RouteHandler | None
    """None: answered before the dispatcher's table is consulted (`/openapi.json` by
    server.route itself, before any view exists; `/metrics` by the HTTP handler)."""
    token: bool = False
    """Needs the job's token (every action, and the reads that carry tracebacks and logs)."""
    errors: str = "read"
    """Which error responses it documents: "read", "action" or "none"."""
    extra_errors: tuple[tuple[str, str], ...] = ()
    """More (status, description) error responses."""
    query: tuple[QueryParameter, ...] = ()
    request_body: str | None = None
    """The schema name of an action's optional JSON body."""
    operation_id: str | None = None
    """None: derived from the path (get_jobs_job_id_plan)."""
    in_table: bool = True
    """False: not in the dispatcher's table (`/metrics`, Prometheus' text, which the HTTP
    handler answers itself)."""


# ---- handlers ----------------------------------------------------------------------------------


def _job(view: JobView, job_id: str) -> JobView:
    if job_id != view.job_id:
        raise RestError(
            HTTPStatus.NOT_FOUND, f"job {job_id} not found; this endpoint serves job {view.job_id}"
        )
    return view


def _checkpoint(view: JobView, job_id: str, checkpoint_id: str) -> dict[str, Any]:
    stats = _job(view, job_id).checkpoints.checkpoint(int(checkpoint_id))
    if stats is None:
        raise RestError(
            HTTPStatus.NOT_FOUND,
            f"checkpoint {checkpoint_id} of job {job_id} is not in the statistics history "
            "(it keeps the newest checkpoints; `barrierflow checkpoints` shows older ones)",
        )
    return rest_json.checkpoint_json(stats, details=True)


def _vertex(view: JobView, job_id: str, checkpoint_id: str, vertex_id: str) -> dict[str, Any]:
    tasks = _checkpoint(view, job_id, checkpoint_id)["tasks"]
    if vertex_id not in tasks:
        raise RestError(
            HTTPStatus.NOT_FOUND,
            f"checkpoint {checkpoint_id} of job {job_id} has no vertex {vertex_id}",
        )
    return tasks[vertex_id]


def _metrics(view: JobView, request: RestRequest, job_id: str) -> MetricsSnapshot:
    _job(view, job_id)
    if request.metrics is None:
        raise RestError(HTTPStatus.NOT_FOUND, f"job {job_id} has no metrics on this endpoint")
    return request.metrics


def _vertex_metrics(
    view: JobView, request: RestRequest, job_id: str, vertex_id: str
) -> tuple[int, Any]:
    snapshot = _metrics(view, request, job_id)
    if not any(str(v.vertex_id) == vertex_id for v in view.vertices):
        raise RestError(HTTPStatus.NOT_FOUND, f"job {job_id} has no vertex {vertex_id}")
    get = parse_qs(urlsplit(request.path).query).get("get")
    return HTTPStatus.OK, metrics_json.vertex_metrics_json(
        snapshot, int(vertex_id), ",".join(get) if get else None
    )


def _read(reader: Callable[..., Any]) -> RouteHandler:
    """A GET handler of the view alone, answering 200."""
    return lambda view, control, request, *groups: (HTTPStatus.OK, reader(view, *groups))


def _query(request: RestRequest) -> dict[str, list[str]]:
    return parse_qs(urlsplit(request.path).query)


def _vertex_view(view: JobView, job_id: str, vertex_id: str) -> VertexView:
    for vertex in _job(view, job_id).vertices:
        if str(vertex.vertex_id) == vertex_id:
            return vertex
    raise RestError(HTTPStatus.NOT_FOUND, f"job {job_id} has no vertex {vertex_id}")


def _log_file(
    view: JobView, control: Any, request: RestRequest, job_id: str, name: str
) -> tuple[int, Any]:
    tail = _query(request).get("tail")
    text = rest_logs.read_log(_job(view, job_id).log_dir, name, tail[-1] if tail else None)
    return HTTPStatus.OK, RawBody(text, "text/plain; charset=utf-8")


# ---- the routes --------------------------------------------------------------------------------

DECLARED: tuple[Declared, ...] = (
    Declared("GET", "/openapi.json", "this description", Response("OpenAPI 3.0", "OpenApi"),
             None, errors="none"),
    Declared("GET", "/overview", "the endpoint's jobs by state",
             Response("counts", "ClusterOverview"),
             _read(lambda v: rest_json.cluster_overview_json(v))),
    Declared("GET", "/jobs", "the job's id and state", Response("the job", "JobIds"),
             _read(lambda v: {"jobs": [{"id": v.job_id, "status": v.state}]})),
    Declared("GET", "/jobs/overview", "name, state, start, attempt",
             Response("the job", "JobsOverview"),
             _read(lambda v: {"jobs": [rest_json.job_overview_json(v)]})),
    Declared("GET", "/jobs/{job_id}",
             "state, attempt, vertices, edges and the Spark UI's address",
             Response("the job", "Job"), _read(lambda v, j: rest_json.job_json(_job(v, j)))),
    Declared("GET", "/jobs/{job_id}/plan", "the job graph as Flink's plan",
             Response("the plan", "JobPlan"),
             _read(lambda v, j: {"plan": rest_json.plan_json(_job(v, j))})),
    Declared("GET", "/jobs/{job_id}/config",
             "parallelism, checkpointing, restart strategy, storage, Spark (no secrets)",
             Response("the configuration", "JobConfig"),
             _read(lambda v, j: rest_json.config_json(_job(v, j)))),
    Declared("GET", "/jobs/{job_id}/exceptions",
             "the failure history (newest first) and the restart strategy's state",
             Response("the history", "Exceptions"),
             _read(lambda v, j: rest_json.exceptions_json(_job(v, j))), token=True),
    Declared("GET", "/jobs/{job_id}/vertices/{vertex_id}",
             "a vertex and each subtask's host, pid, status and latest metrics",
             Response("the vertex", "Vertex"),
             lambda v, c, r, j, vertex: (
                 HTTPStatus.OK, rest_json.vertex_json(v, _vertex_view(v, j, vertex), r.metrics))),
    Declared("GET", "/jobs/{job_id}/checkpoints", "checkpoint counts, summary, latest and history",
             Response("the statistics", "Checkpoints"),
             _read(lambda v, j: rest_json.checkpoints_json(_job(v, j).checkpoints))),
    Declared("GET", "/jobs/{job_id}/checkpoints/config", "the checkpointing settings",
             Response("the settings", "CheckpointConfig"),
             _read(lambda v, j: _job(v, j).checkpoint_config)),
    Declared("GET", "/jobs/{job_id}/checkpoints/details/{checkpoint_id}",
             "one checkpoint with every vertex and subtask",
             Response("the checkpoint", "CheckpointDetails"), _read(_checkpoint)),
    Declared("GET", "/jobs/{job_id}/checkpoints/details/{checkpoint_id}/subtasks/{vertex_id}",
             "one vertex's subtasks in one checkpoint",
             Response("the vertex's subtasks", "CheckpointVertex"), _read(_vertex)),
    Declared("GET", "/jobs/{job_id}/vertices/{vertex_id}/metrics",
             "Flink's metric ids of a vertex, or with ?get=a,b their values",
             Response("ids, or ids and values", "VertexMetrics"),
             lambda v, c, r, j, vertex: _vertex_metrics(v, r, j, vertex),
             query=(QueryParameter("get", {"type": "string"},
                                   "comma-separated metric ids whose values to return"),)),
    Declared("GET", "/jobs/{job_id}/metrics/history",
             "per vertex: current aggregates and chart columns",
             Response("the history", "MetricsHistory"),
             lambda v, c, r, j: (
                 HTTPStatus.OK, metrics_json.metrics_history_json(_metrics(v, r, j)))),
    Declared("GET", "/jobs/{job_id}/logs", "the job's log files", Response("the files", "Logs"),
             _read(lambda v, j: rest_logs.list_logs(_job(v, j).log_dir)), token=True),
    Declared("GET", "/jobs/{job_id}/logs/{log_name}",
             "a log file's text (its last 8 MiB), or its last `tail` lines",
             Response("the text", text=True), _log_file, token=True,
             extra_errors=(("400", "not a plain file name, or a bad tail"),),
             query=(QueryParameter("tail", {"type": "integer", "minimum": 0, "maximum": 100_000},
                                   "only the file's last N lines"),)),
    Declared("GET", "/jobs/{job_id}/savepoints/{trigger_id}",
             "a triggered savepoint's or stop's state",
             Response("the operation", "SavepointStatus"),
             lambda v, c, r, j, t: (HTTPStatus.OK, rest_actions.savepoint_status(v, c, j, t))),
    Declared("POST", "/jobs/{job_id}/savepoints", "trigger a savepoint",
             Response("triggered", "Triggered", status=202),
             lambda v, c, r, j: rest_actions.trigger_savepoint(v, c, j, r.body, r.authorization),
             token=True, errors="action", request_body="SavepointRequest",
             operation_id="triggerSavepoint"),
    Declared("POST", "/jobs/{job_id}/stop", "stop the job with a savepoint",
             Response("triggered", "Triggered", status=202),
             lambda v, c, r, j: rest_actions.stop(v, c, j, r.body, r.authorization),
             token=True, errors="action", request_body="StopRequest",
             operation_id="stopWithSavepoint"),
    Declared("PATCH", "/jobs/{job_id}", "cancel the job", Response("cancelling", status=202),
             lambda v, c, r, j: rest_actions.cancel(v, c, j, _query(r), r.authorization),
             token=True, errors="action", operation_id="cancelJob",
             query=(QueryParameter("mode", {"type": "string", "enum": ["cancel"]}),)),
    Declared("GET", "/metrics", "the job's metrics in Prometheus' text format",
             Response("Prometheus text format 0.0.4", text=True), None, errors="none",
             operation_id="get_metrics", in_table=False),
)  # fmt: skip
"""Every route. The GETs without a token are open; the token's check of a GET is the
dispatcher's (server.py), an action checks it itself (actions.py)."""
