"""The REST endpoint's actions on a running job (savepoint, stop, cancel), in Flink's shapes.

Their routes are declared once, in routes.py (path, method, schema; openapi.py's schemas
give the bodies): a savepoint or a stop answers 202 with a request id, whose operation is
read until its status is COMPLETED with a location or a failure cause; a cancel answers
202 with an empty body.

An action needs `Authorization: Bearer <token>`, the token the job registered
(cluster/registry.py): none is a 401, another a 403. Reading stays open, as every GET but
the logs and the exception history (server.TOKEN_ROUTES), which need the token too.
A job id other than the endpoint's is a 404 naming it; an action on a job that already
ended is a 409. The functions here are pure but for the `JobControl`, which calls the
job's `JobActions` and remembers which stops were asked for, so that the endpoint of a
stopped job outlives it until the stop's result was read (`wait_for_stop_results`).
"""

from __future__ import annotations

import hmac
import json
import threading
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from barrierflow.cluster.jobmaster.views import JobStatus, SavepointOperation
from barrierflow.cluster.rest.job_actions import JobActions
from barrierflow.errors import BarrierflowError, ConfigurationError

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.views import JobView

__all__ = ["JobControl", "RestError"]


class RestError(Exception):
    """A request the endpoint refuses: its HTTP status and one readable line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class JobControl:
    """What the endpoint may do to its job: the job's actions and the token they require.
    Any HTTP thread."""

    def __init__(self, actions: JobActions, token: str) -> None:
        if not token:
            raise ValueError("a job's action token must not be empty")
        self.actions = actions
        self._token = token
        self._unread_stops: set[str] = set()
        self._changed = threading.Condition()

    def check_token(self, authorization: str | None) -> None:
        """Refuse a request without the token (401) or with another one (403)."""
        if not authorization:
            raise RestError(
                HTTPStatus.UNAUTHORIZED,
                "this action needs the job's token: send 'Authorization: Bearer <token>' "
                "(`barrierflow list --json` on the job's machine shows it)",
            )
        scheme, _, given = authorization.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            given.strip().encode(), self._token.encode()
        ):
            raise RestError(HTTPStatus.FORBIDDEN, "wrong token for this job's actions")

    def stop_requested(self, trigger_id: str) -> None:
        with self._changed:
            self._unread_stops.add(trigger_id)

    def operation_read(self, operation: SavepointOperation) -> None:
        if operation.status != "IN_PROGRESS":
            with self._changed:
                self._unread_stops.discard(operation.trigger_id)
                self._changed.notify_all()

    def wait_for_stop_results(self, timeout_s: float) -> bool:
        """Wait until the result of every stop asked for here was read, at most `timeout_s`:
        the endpoint ends with its job, and a stopped job's savepoint path must reach the
        client that asked. True when nothing is left unread."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._unread_stops, timeout_s)


def trigger_savepoint(
    view: JobView,
    control: JobControl | None,
    job_id: str,
    body: bytes | None,
    authorization: str | None,
) -> tuple[int, dict[str, Any]]:
    control = _admit(view, control, job_id, authorization)
    request = _json_body(body)
    if request.get("cancel-job"):
        raise RestError(
            HTTPStatus.BAD_REQUEST,
            "cancel-job is not supported: stop the job with a savepoint instead "
            f"(POST /jobs/{job_id}/stop)",
        )
    target = _optional_str(request, "target-directory")
    trigger_id = _act(lambda: control.actions.trigger_savepoint(target))
    return HTTPStatus.ACCEPTED, {"request-id": trigger_id}


def stop(
    view: JobView,
    control: JobControl | None,
    job_id: str,
    body: bytes | None,
    authorization: str | None,
) -> tuple[int, dict[str, Any]]:
    control = _admit(view, control, job_id, authorization)
    request = _json_body(body)
    target = _optional_str(request, "targetDirectory")
    drain = request.get("drain", False)
    if not isinstance(drain, bool):
        raise RestError(HTTPStatus.BAD_REQUEST, f"'drain' must be true or false, got {drain!r}")
    trigger_id = _act(lambda: control.actions.stop_with_savepoint(target, drain))
    control.stop_requested(trigger_id)
    return HTTPStatus.ACCEPTED, {"request-id": trigger_id}


def cancel(
    view: JobView,
    control: JobControl | None,
    job_id: str,
    query: dict[str, list[str]],
    authorization: str | None,
) -> tuple[int, dict[str, Any]]:
    control = _admit(view, control, job_id, authorization)
    mode = query.get("mode", ["cancel"])[-1]
    if mode != "cancel":
        raise RestError(
            HTTPStatus.BAD_REQUEST,
            f"mode={mode} is not supported: use mode=cancel, or POST /jobs/{job_id}/stop",
        )
    _act(lambda: control.actions.request_cancel("cancelled through the REST endpoint"))
    return HTTPStatus.ACCEPTED, {}


def savepoint_status(
    view: JobView, control: JobControl | None, job_id: str, trigger_id: str
) -> dict[str, Any]:
    """A triggered savepoint's state (open to read, like every GET, also after the end)."""
    _same_job(view, job_id)
    if control is None:
        raise RestError(HTTPStatus.NOT_FOUND, "this endpoint takes no savepoints")
    operation = control.actions.savepoint_operation(trigger_id)
    if operation is None:
        raise RestError(
            HTTPStatus.NOT_FOUND, f"no savepoint with trigger id {trigger_id} in job {job_id}"
        )
    control.operation_read(operation)
    return operation_json(operation)


def operation_json(operation: SavepointOperation) -> dict[str, Any]:
    """Flink's asynchronous operation result: a FAILED savepoint is COMPLETED with a cause.

    >>> operation_json(SavepointOperation("t1", "COMPLETED", location="/sp/savepoint-1"))
    {'status': {'id': 'COMPLETED'}, 'operation': {'location': '/sp/savepoint-1'}}
    >>> operation_json(SavepointOperation("t1", "IN_PROGRESS"))
    {'status': {'id': 'IN_PROGRESS'}}
    """
    if operation.status == "IN_PROGRESS":
        return {"status": {"id": "IN_PROGRESS"}}
    if operation.status == "COMPLETED":
        result: dict[str, Any] = {"location": operation.location}
    else:
        cause = operation.failure or "the savepoint failed"
        result = {"failure-cause": {"class": "SavepointFailure", "stack-trace": cause}}
    return {"status": {"id": "COMPLETED"}, "operation": result}


# ---- the checks every action makes, in order ---------------------------------------------------


def _admit(
    view: JobView, control: JobControl | None, job_id: str, authorization: str | None
) -> JobControl:
    if control is None:
        raise RestError(HTTPStatus.METHOD_NOT_ALLOWED, "this endpoint is read-only")
    control.check_token(authorization)
    _same_job(view, job_id)
    if JobStatus.ended(view.state):  # an ended job takes no more actions
        raise RestError(
            HTTPStatus.CONFLICT,
            f"job {job_id} ('{view.name}') already ended ({view.state}): it takes no more actions",
        )
    return control


def _same_job(view: JobView, job_id: str) -> None:
    if job_id != view.job_id:
        raise RestError(
            HTTPStatus.NOT_FOUND, f"job {job_id} not found; this endpoint serves job {view.job_id}"
        )


def _act(action: Any) -> Any:
    """Run a JobActions call; its refusal (a bad setting, a job that cannot) is the client's."""
    try:
        return action()
    except ConfigurationError as error:
        raise RestError(HTTPStatus.BAD_REQUEST, str(error)) from error
    except BarrierflowError as error:
        raise RestError(HTTPStatus.CONFLICT, str(error)) from error


def _json_body(body: bytes | None) -> dict[str, Any]:
    if not body or not body.strip():
        return {}
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RestError(HTTPStatus.BAD_REQUEST, f"the request body is not JSON: {error}") from error
    if not isinstance(document, dict):
        raise RestError(HTTPStatus.BAD_REQUEST, "the request body must be a JSON object")
    return document


def _optional_str(request: dict[str, Any], name: str) -> str | None:
    value = request.get(name)
    if value is not None and (not isinstance(value, str) or not value):
        raise RestError(HTTPStatus.BAD_REQUEST, f"'{name}' must be a folder path, got {value!r}")
    return value
