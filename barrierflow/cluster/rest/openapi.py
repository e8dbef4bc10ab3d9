"""The REST endpoint's OpenAPI 3.0 description, served at `/openapi.json`.

One dict, built by `openapi_spec` from the routes declared in routes.py (the same
declarations the dispatcher's table is built from): their parameters, the JSON bodies'
schemas, Flink's error body `{"errors": [...]}`, and the bearer token the actions, the
logs and the exception history need. Other reads need nothing. The schemas name the
fields every body has; bodies may carry more (a field added later is no breaking change),
so objects stay open.
"""

from __future__ import annotations

from typing import Any

from barrierflow.cluster.jobmaster.views import JobStatus, Recovery
from barrierflow.cluster.rest.routes import DECLARED, Declared, QueryParameter, Response

__all__ = ["EXTRA_PATHS", "OPENAPI_VERSION", "openapi_spec"]

OPENAPI_VERSION = "3.0.3"
EXTRA_PATHS = frozenset((r.method, r.template) for r in DECLARED if not r.in_table)
"""Declared routes answered outside the dispatcher's table (Prometheus' text format)."""


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, "nullable": True, **more}


def _object(required: dict[str, Any], **more: Any) -> dict[str, Any]:
    """An open object whose `required` fields all appear."""
    return {"type": "object", "required": list(required), "properties": required, **more}


_INT = {"type": "integer"}
_STR = {"type": "string"}
_NUM_OR_NULL = _nullable("number")
_INT_OR_NULL = _nullable("integer")
_STR_OR_NULL = _nullable("string")
_ANY_OBJECT = {"type": "object"}
_JOB_STATUS = {"type": "string", "enum": [status.value for status in JobStatus]}
"""A job's state (`JobStatus`), as the job bodies' `state` and the job list's `status`."""

_SCHEMAS: dict[str, Any] = {
    "Error": _object({"errors": {"type": "array", "items": _STR, "minItems": 1}}),
    "ClusterOverview": _object(
        {
            "jobs-running": _INT,
            "jobs-finished": _INT,
            "jobs-cancelled": _INT,
            "jobs-failed": _INT,
            "slots-total": _INT,
            "spark_ui": _STR_OR_NULL,
        }
    ),
    "JobIds": _object(
        {"jobs": {"type": "array", "items": _object({"id": _STR, "status": _JOB_STATUS})}}
    ),
    "JobOverview": _object(
        {
            "jid": _STR,
            "name": _STR,
            "state": _JOB_STATUS,
            "attempt": _INT,
            "start-time": _INT,
            "end-time": _INT,
            "duration": _INT,
            "last-modification": _INT,
            "tasks": _object({"total": _INT}),
        }
    ),
    "JobsOverview": _object({"jobs": {"type": "array", "items": _ref("JobOverview")}}),
    "Operator": _object({"uid": _STR, "name": _STR}),
    "Edge": _object(
        {
            "source": _INT,
            "target": _INT,
            "partitioning": _STR,
            "side_output": _STR_OR_NULL,
            "target_input": _INT,
        }
    ),
    "Plan": _object(
        {
            "jid": _STR,
            "name": _STR,
            "type": _STR,
            "nodes": {
                "type": "array",
                "items": _object(
                    {
                        "id": _STR,
                        "parallelism": _INT,
                        "operator": _STR,
                        "description": _STR,
                        "inputs": {
                            "type": "array",
                            "items": _object(
                                {
                                    "num": _INT,
                                    "id": _STR,
                                    "ship_strategy": _STR,
                                    "exchange": _STR,
                                }
                            ),
                        },
                    }
                ),
            },
        }
    ),
    "Job": {
        "allOf": [
            _ref("JobOverview"),
            _object(
                {
                    "now": _INT,
                    "restored_from": _INT_OR_NULL,
                    "max_parallelism": _INT_OR_NULL,
                    "spark_ui": _STR_OR_NULL,
                    "vertices": {
                        "type": "array",
                        "items": _object(
                            {
                                "id": _INT,
                                "name": _STR,
                                "parallelism": _INT,
                                "operators": {"type": "array", "items": _ref("Operator")},
                            }
                        ),
                    },
                    "edges": {"type": "array", "items": _ref("Edge")},
                    "plan": _ref("Plan"),
                }
            ),
        ]
    },
    "JobPlan": _object({"plan": _ref("Plan")}),
    "JobConfig": _object(
        {
            "jid": _STR,
            "name": _STR,
            "parallelism": _INT,
            "max_parallelism": _INT,
            "checkpointing": _ANY_OBJECT,
            "restart_strategy": _object({"type": _STR}),
            "storage": _ANY_OBJECT,
            "spark": _object({"master": _STR_OR_NULL}),
            "spark_ui": _STR_OR_NULL,
        }
    ),
    "Failure": _object(
        {
            "timestamp": _INT,
            "attempt": _INT,
            "root_cause": _STR,
            "exceptionName": _STR_OR_NULL,
            "taskName": _STR_OR_NULL,
            "stacktrace": _STR_OR_NULL,
            "recovery": {"type": "string", "enum": [r.value for r in Recovery]},
            "delay_ms": _INT_OR_NULL,
            "explanation": _STR,
        }
    ),
    "Exceptions": _object(
        {
            "root-exception": _STR_OR_NULL,
            "timestamp": _INT_OR_NULL,
            "truncated": {"type": "boolean"},
            "exceptionHistory": _object(
                {
                    "entries": {"type": "array", "items": _ref("Failure")},
                    "truncated": {"type": "boolean"},
                }
            ),
            "restart_strategy": _object(
                {
                    "type": _STR,
                    "restarts": _INT,
                    "limit": _INT_OR_NULL,
                    "last_delay_ms": _INT_OR_NULL,
                    "next_delay_ms": _INT_OR_NULL,
                }
            ),
        }
    ),
    "SubtaskMetrics": _object(
        {
            "subtask": _INT,
            "attempt": _INT,
            "time_ms": _INT,
            "records_in": _INT,
            "records_out": _INT,
            "records_in_per_second": _NUM_OR_NULL,
            "records_out_per_second": _NUM_OR_NULL,
            "busy_ms_per_second": _NUM_OR_NULL,
            "backpressured_ms_per_second": _NUM_OR_NULL,
            "watermark": _INT_OR_NULL,
            "watermark_lag_ms": _NUM_OR_NULL,
        }
    ),
    "Vertex": _object(
        {
            "id": _INT,
            "name": _STR,
            "parallelism": _INT,
            "maxParallelism": _INT_OR_NULL,
            "now": _INT,
            "operators": {"type": "array", "items": _ref("Operator")},
            "metrics": _nullable("object", required=["reporting"]),
            "subtasks": {
                "type": "array",
                "items": _object(
                    {
                        "subtask": _INT,
                        "status": _STR,
                        "attempt": _INT,
                        "host": _STR_OR_NULL,
                        "pid": _INT_OR_NULL,
                        "metrics": {"allOf": [_ref("SubtaskMetrics")], "nullable": True},
                    }
                ),
            },
        }
    ),
    "Checkpoints": _object(
        {
            "counts": _object(
                {
                    "restored": _INT,
                    "total": _INT,
                    "in_progress": _INT,
                    "completed": _INT,
                    "failed": _INT,
                }
            ),
            "summary": _ANY_OBJECT,
            "latest": _object(
                {
                    "completed": _nullable("object"),
                    "savepoint": _nullable("object"),
                    "failed": _nullable("object"),
                    "restored": _nullable("object"),
                }
            ),
            "history": {"type": "array", "items": _object({"id": _INT, "status": _STR})},
        }
    ),
    "CheckpointConfig": _ANY_OBJECT,
    "CheckpointDetails": _object({"id": _INT, "status": _STR, "tasks": _ANY_OBJECT}),
    "CheckpointVertex": _object({"subtasks": {"type": "array", "items": _ANY_OBJECT}}),
    "VertexMetrics": {
        "type": "array",
        "items": _object({"id": _STR}, properties={"id": _STR, "value": _STR_OR_NULL}),
    },
    "MetricsHistory": _object(
        {
            "time_ms": _INT,
            "attempt": _INT,
            "restarts": _INT,
            "vertices": {"type": "array", "items": _object({"id": _INT, "history": _ANY_OBJECT})},
        }
    ),
    "Logs": _object(
        {
            "logs": {
                "type": "array",
                "items": _object({"name": _STR, "size": _INT, "mtime": _INT}),
            }
        }
    ),
    "SavepointStatus": _object(
        {
            "status": _object({"id": {"type": "string", "enum": ["IN_PROGRESS", "COMPLETED"]}}),
        }
    ),
    "Triggered": _object({"request-id": _STR}),
    "SavepointRequest": {
        "type": "object",
        "properties": {
            "target-directory": {"type": "string", "minLength": 1},
            "cancel-job": {"type": "boolean", "enum": [False]},
        },
    },
    "StopRequest": {
        "type": "object",
        "properties": {
            "targetDirectory": {"type": "string", "minLength": 1},
            "drain": {"type": "boolean"},
        },
    },
    "OpenApi": _object({"openapi": _STR, "paths": _ANY_OBJECT}),
}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(description, _ref("Error"))


def _path_parameter(name: str, description: str, job_id: str | None) -> dict[str, Any]:
    schema: dict[str, Any] = (
        {"type": "integer", "minimum": 0}
        if name in ("checkpoint_id", "vertex_id")
        else {"type": "string", "minLength": 1}
    )
    parameter = {"name": name, "in": "path", "required": True, "description": description,
                 "schema": schema}  # fmt: skip
    if name == "job_id" and job_id is not None:
        parameter["example"] = job_id
    return parameter


_PARAMETER_TEXT = {
    "job_id": "the job's id (the endpoint serves one job)",
    "vertex_id": "a vertex of the job graph",
    "checkpoint_id": "a checkpoint id in the statistics history",
    "trigger_id": "the request-id a savepoint or stop answered",
    "log_name": "a plain file name of the job's log folder (GET /jobs/{job_id}/logs)",
}

_ERRORS: dict[str, dict[str, Any]] = {
    "none": {},
    "read": {
        "404": _error("no such job, vertex, checkpoint or file"),
        "503": _error("the job is starting"),
    },
    "action": {
        "400": _error("a bad body or parameter"),
        "401": _error("no token"),
        "403": _error("a wrong token"),
        "404": _error("no such job"),
        "405": _error("the endpoint is read-only"),
        "409": _error("the job already ended or cannot take the action now"),
        "503": _error("the job is starting"),
    },
}
"""The error responses a route documents, by `Declared.errors`."""
_TOKEN_ERRORS = {"401": _error("no token"), "403": _error("a wrong token")}


def _response(response: Response) -> dict[str, Any]:
    if response.text:
        return {
            "description": response.description,
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    schema = _ref(response.schema) if response.schema else _ANY_OBJECT
    return _json(response.description, schema)


def _query_parameter(parameter: QueryParameter) -> dict[str, Any]:
    described = {} if parameter.description is None else {"description": parameter.description}
    return {"name": parameter.name, "in": "query", "required": False,
            "schema": parameter.schema, **described}  # fmt: skip


def _operation_id(path: str) -> str:
    words = [w.strip("{}") for w in path.strip("/").replace(".", "_").split("/")]
    return "get_" + "_".join(w for w in words if w) if words != [""] else "get_root"


def _operation(route: Declared, job_id: str | None) -> dict[str, Any]:
    names = [part.strip("{}") for part in route.template.split("/") if part.startswith("{")]
    parameters = [_path_parameter(n, _PARAMETER_TEXT[n], job_id) for n in names]
    parameters += [_query_parameter(q) for q in route.query]
    operation: dict[str, Any] = {
        "summary": route.summary,
        "operationId": route.operation_id or _operation_id(route.template),
    }
    if parameters or route.in_table:  # `/metrics` has none and lists none
        operation["parameters"] = parameters
    if route.request_body is not None:
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": _ref(route.request_body)}},
        }
    operation["responses"] = {
        str(route.response.status): _response(route.response),
        **_ERRORS[route.errors],
        **{status: _error(text) for status, text in route.extra_errors},
        **(_TOKEN_ERRORS if route.token else {}),
    }
    if route.token:
        operation["security"] = [{"jobToken": []}]
    return operation


def openapi_spec(job_id: str | None = None) -> dict[str, Any]:
    """The description of every declared route; `job_id` (the endpoint's job) is the
    job_id parameter's example."""
    paths: dict[str, dict[str, Any]] = {}
    for route in DECLARED:
        paths.setdefault(route.template, {})[route.method.lower()] = _operation(route, job_id)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "barrierflow job REST API",
            "version": "1",
            "description": (
                "The JobMaster's endpoint for one running job, in Flink's REST shapes. "
                "Reads are open but for the logs and the exception history; those and the "
                "actions need the job's token (`barrierflow list --json`). Credentials in "
                "URIs are left out of every body. "
                'Every error is {"errors": ["..."]}.'
            ),
        },
        "paths": paths,
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {
                "jobToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the job's token from the local job registry",
                }
            },
        },
    }
