"""A running job seen from outside: an HTTP client of its REST endpoint, for the command line.

Every request is bounded (`timeout_s`), and every way a request can go wrong becomes a
`RemoteJobError` of one readable line: the endpoint unreachable or silent, an HTTP
error with the endpoint's own message (Flink's `{"errors": [...]}`), an answer that is
not JSON. Waiting (for a savepoint, for the job to end) polls with a bound too.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from barrierflow.errors import (
    RemoteJobError,
    SavepointFailedError,
    TokenRefusedError,
    UnreachableError,
)
from barrierflow.jobs import JobStatus

__all__ = ["RemoteJob"]

POLL_INTERVAL_S = 0.2


@dataclass(frozen=True)
class RemoteJob:
    """One job's REST endpoint. Stateless: any thread.

    >>> RemoteJob("http://127.0.0.1:1/", "j1").url("savepoints", "t 1")
    'http://127.0.0.1:1/jobs/j1/savepoints/t%201'
    """

    base_url: str
    job_id: str
    token: str | None = None
    timeout_s: float = 10.0

    def url(self, *parts: str) -> str:
        return "/".join(
            [self.base_url.rstrip("/"), "jobs", quote(self.job_id, safe="")]
            + [quote(part, safe="") for part in parts]
        )

    # ---- reading (open) ----------------------------------------------------------------------

    def details(self) -> dict[str, Any]:
        """`GET /jobs/<id>`: name, state, start time, vertices."""
        return request_json("GET", self.url(), timeout_s=self.timeout_s)[1]

    def checkpoints(self) -> dict[str, Any]:
        return request_json("GET", self.url("checkpoints"), timeout_s=self.timeout_s)[1]

    def savepoint_status(self, trigger_id: str) -> dict[str, Any]:
        return request_json("GET", self.url("savepoints", trigger_id), timeout_s=self.timeout_s)[1]

    # ---- actions (with the token) ------------------------------------------------------------

    def trigger_savepoint(self, target_dir: str | None) -> str:
        """The trigger id of a new savepoint into `target_dir` (None: the job's default)."""
        body = {"target-directory": target_dir, "cancel-job": False}
        return self._act("POST", self.url("savepoints"), body)["request-id"]

    def stop(self, target_dir: str | None, drain: bool) -> str:
        """The trigger id of a stop with savepoint."""
        body = {"targetDirectory": target_dir, "drain": drain}
        return self._act("POST", self.url("stop"), body)["request-id"]

    def cancel(self) -> None:
        self._act("PATCH", self.url() + "?mode=cancel", None)

    def _act(self, method: str, url: str, body: dict[str, Any] | None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return request_json(method, url, body, headers, timeout_s=self.timeout_s)[1]

    # ---- waiting -----------------------------------------------------------------------------

    def wait_for_savepoint(
        self,
        trigger_id: str,
        timeout_s: float,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> str:
        """Poll the savepoint until it completed (its location) or failed (raised)."""
        deadline = monotonic() + timeout_s
        while True:
            answer = self.savepoint_status(trigger_id)
            if answer.get("status", {}).get("id") == "COMPLETED":
                operation = answer.get("operation") or {}
                if operation.get("location"):
                    return str(operation["location"])
                cause = operation.get("failure-cause") or {}
                reason = cause.get("stack-trace") or cause.get("class") or "no cause given"
                raise SavepointFailedError(f"the savepoint of job {self.job_id} failed: {reason}")
            if monotonic() >= deadline:
                raise RemoteJobError(
                    f"the savepoint of job {self.job_id} (trigger {trigger_id}) did not complete "
                    f"within {timeout_s:g} s; it may still complete"
                )
            sleep(POLL_INTERVAL_S)

    def wait_until_ended(
        self,
        timeout_s: float,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> str | None:
        """The job's final state once it ended; None if its endpoint closed first (the
        endpoint ends with its job). Raises if it still runs after `timeout_s`."""
        deadline = monotonic() + timeout_s
        while True:
            try:
                state = self.details().get("state")
            except UnreachableError:
                return None
            if JobStatus.ended(state):
                return state
            if monotonic() >= deadline:
                raise RemoteJobError(f"job {self.job_id} is still {state} after {timeout_s:g} s")
            sleep(POLL_INTERVAL_S)


def request_json(
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    *,
    timeout_s: float = 10.0,
) -> tuple[int, dict[str, Any]]:
    """(status, JSON body) of a successful request; a RemoteJobError for anything else."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        raise _http_error(method, url, error) from None
    except TimeoutError:
        raise UnreachableError(f"{url} did not answer within {timeout_s:g} s") from None
    except urllib.error.URLError as error:
        reason = error.reason
        if isinstance(reason, TimeoutError):
            raise UnreachableError(f"{url} did not answer within {timeout_s:g} s") from None
        raise UnreachableError(f"cannot reach {url}: {_reason(reason)}") from None
    except (OSError, ValueError) as error:  # connection reset, malformed URL
        raise UnreachableError(f"cannot reach {url}: {_reason(error)}") from None
    try:
        return status, json.loads(raw) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise RemoteJobError(f"{url} answered {status} with a body that is not JSON") from None


def _http_error(method: str, url: str, error: urllib.error.HTTPError) -> RemoteJobError:
    try:
        message = "; ".join(str(e) for e in json.loads(error.read())["errors"])
    except Exception:
        message = error.reason or "no message"
    text = f"{method} {url}: {error.code} {message}"
    if error.code in (401, 403):
        return TokenRefusedError(text, error.code)
    return RemoteJobError(text, error.code)


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the job still running?)"
    return str(getattr(reason, "strerror", None) or reason)
