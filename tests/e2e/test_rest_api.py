"""The REST API of a real running job against its own OpenAPI spec: schemathesis generates
requests for every read-only route (no 5xx; every response conforms to its documented status,
content type and schema); the actions refuse a missing (401) or wrong (403) token, bad JSON
is a 400; an injected failure appears in /jobs/<id>/exceptions with its root cause."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import hypothesis
import pytest
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from barrierflow.errors import JobExecutionError

from .jobs import paced_word_count, wait_for_attempt

pytestmark = pytest.mark.spark

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


def call(url: str, method: str = "GET", body: bytes | None = None, token: str | None = None):
    request = urllib.request.Request(url, data=body, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        assert error.headers["Content-Type"] == "application/json; charset=utf-8"
        return error.code, json.loads(error.read())


def test_the_rest_api_of_a_running_job_keeps_to_its_openapi_spec(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("BARRIERFLOW_REST_PORT", "0")
    monkeypatch.setenv("BARRIERFLOW_LOG_DIR", str(tmp_path / "logs"))
    env = paced_word_count(tmp_path, 10_000_000, 2_000)
    job = env.execute_async("rest-api-job")
    try:
        assert job.wait_until_running(timeout=60)
        assert job.wait_for_completed_checkpoints(1, timeout=30)
        base, job_id = job.rest_url, job.get_job_id()
        assert base is not None and base.startswith("http://127.0.0.1:")

        # an injected failure is in the history with its root cause
        attempt = job.inject_failure("exception", vertex_id=1, subtask_index=0)
        wait_for_attempt(job, attempt + 1, timeout=30)
        token = job.action_token
        assert call(f"{base}/jobs/{job_id}/exceptions")[0] == 401  # the job's token, or nothing
        assert call(f"{base}/jobs/{job_id}/logs", token="wrong")[0] == 403
        status, history = call(f"{base}/jobs/{job_id}/exceptions", token=token)
        assert status == 200
        (entry,) = history["exceptionHistory"]["entries"]
        assert (
            entry["attempt"] == attempt and "injected by barrierflow chaos" in entry["root_cause"]
        )
        assert entry["taskName"] and entry["recovery"] in ("in-place", "new-stage")
        assert history["restart_strategy"]["restarts"] == 1

        # the actions: no token, a wrong one, bad JSON (the job keeps running)
        savepoints = f"{base}/jobs/{job_id}/savepoints"
        assert call(savepoints, "POST", b"{}")[0] == 401
        assert call(savepoints, "POST", b"{}", token="wrong")[0] == 403
        assert call(f"{base}/jobs/{job_id}?mode=cancel", "PATCH")[0] == 401
        assert call(f"{base}/jobs/{job_id}/stop", "POST", b"{}", token="wrong")[0] == 403
        assert call(f"{base}/jobs/{job_id}", "DELETE")[0] == 405
        assert call(f"{base}/jobs/nope/config")[0] == 404

        # schemathesis over every read-only route of the spec the server serves
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
        checked = set()
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.method.upper() != "GET":
                continue
            checked.add(operation.path)

            @hypothesis.settings(
                max_examples=15,
                deadline=None,
                database=None,
                suppress_health_check=list(hypothesis.HealthCheck),
                phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
            )
            @hypothesis.given(case=operation.as_strategy())
            def conforms(case) -> None:
                response = case.call(
                    base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=10
                )
                case.validate_response(response, checks=CHECKS)

            conforms()
        # (schemathesis leaves out the spec's own URL: loading it from there checked it)
        reads = {p for p, ops in schema.raw_schema["paths"].items() if "get" in ops}
        assert checked == reads - {"/openapi.json"} and len(checked) == 18
        assert job.get_job_status() == "RUNNING"  # nothing above stopped it
        status, job_json = call(f"{base}/jobs/{job_id}")
        assert [e["partitioning"] for e in job_json["edges"]] == ["HASH"]
    finally:
        job.cancel()
        with pytest.raises(JobExecutionError, match="cancelled"):
            job.wait(60)
