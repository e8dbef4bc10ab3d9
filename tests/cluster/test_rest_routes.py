"""The routes added for the dashboard and users, with a fake view: the job graph and plan, a
vertex's subtasks with their processes and metrics, the configuration, the exception history
with the restart strategy's state, the Spark UI link; and JSON errors, never HTML, for what
http.server refuses itself (unknown methods, bad request lines)."""

from __future__ import annotations

import json
import socket
from dataclasses import replace

import pytest
from metrics_reports import operator, report
from test_rest import JOB_ID, job_view, tracker_with_checkpoints

from barrierflow._clock import ManualClock
from barrierflow.cluster.jobmaster.views import EdgeView, FailureEntry, JobView
from barrierflow.cluster.metrics.store import MetricsStore
from barrierflow.cluster.rest.actions import JobControl
from barrierflow.cluster.rest.server import RestServer, route
from barrierflow.graph.job_graph import SubtaskId

NOW = 100_000
WITH_TOKEN = {"control": JobControl(object(), "t"), "authorization": "Bearer t"}  # type: ignore[arg-type]
"""The job's token, which the exceptions and logs need (reads only: no action is taken)."""


def full_view(**changes) -> JobView:
    view = replace(
        job_view(tracker_with_checkpoints()),
        published_ms=NOW,
        max_parallelism=128,
        edges=(EdgeView(0, 1, "HASH"),),
        processes={(1, 0): ("worker-1", 4242)},
        config={"parallelism": 2, "max_parallelism": 128, "spark": {"master": "local[4]"}},
        spark_ui="http://driver:4040",
        restart_strategy={"type": "failure-rate", "max_failures_per_interval": 3,
                          "failure_interval_ms": 60_000, "delay_ms": 200},
        exceptions=(
            FailureEntry(NOW - 90_000, 0, "ValueError: old (task 'Reduce -> Sink' (1/2))",
                         "ValueError", "'Reduce -> Sink' (1/2)", "Traceback ...", "new-stage",
                         200, "failure rate allows it"),
            FailureEntry(NOW - 1_000, 1, "KeyError: 'x' (task 'Reduce -> Sink' (2/2))",
                         "KeyError", "'Reduce -> Sink' (2/2)", "Traceback (most recent...",
                         "in-place", 200, "failure rate allows it"),
        ),
    )  # fmt: skip
    return replace(view, **changes)


def metrics_snapshot():
    store = MetricsStore([(0, "Source: words", 1), (1, "Reduce -> Sink", 2)], ManualClock())
    store.attempt_started(1)
    for time_ms, count in ((1_000, 10), (2_000, 30)):
        store.report(
            SubtaskId(1, 0),
            report(time_ms, attempt=1, partition=1, records_in=count,
                   operators=[operator("count", "Reduce", records_in=count, watermark=500)]),
        )  # fmt: skip
    return store.publish()


def test_the_job_shows_its_graph_with_the_partitioning_of_each_edge_and_the_spark_ui():
    status, job = route(full_view(), f"/jobs/{JOB_ID}")

    assert status == 200
    assert job["edges"] == [
        {"source": 0, "target": 1, "partitioning": "HASH", "side_output": None, "target_input": 0}
    ]
    assert (job["max_parallelism"], job["spark_ui"]) == (128, "http://driver:4040")
    nodes = job["plan"]["nodes"]
    assert [(n["id"], n["parallelism"], n["operator"]) for n in nodes] == [
        ("0", 1, "Source: words"),
        ("1", 2, "Reduce -> Sink"),
    ]
    assert nodes[0]["inputs"] == []
    assert [(i["id"], i["ship_strategy"]) for i in nodes[1]["inputs"]] == [("0", "HASH")]
    assert route(full_view(), f"/jobs/{JOB_ID}/plan") == (200, {"plan": job["plan"]})


def test_a_vertex_shows_each_subtask_with_its_process_status_and_metrics():
    status, vertex = route(full_view(), f"/jobs/{JOB_ID}/vertices/1", metrics=metrics_snapshot())

    assert status == 200
    assert (vertex["id"], vertex["name"], vertex["parallelism"]) == (1, "Reduce -> Sink", 2)
    first, second = vertex["subtasks"]
    assert (first["host"], first["pid"], first["status"]) == ("worker-1", 4242, "RUNNING")
    assert first["metrics"]["records_in"] == 30
    assert first["metrics"]["records_in_per_second"] == pytest.approx(20.0)
    assert (second["host"], second["pid"], second["metrics"]) == (None, None, None)
    assert vertex["metrics"]["reporting"] == 1
    deploying = route(full_view(state="DEPLOYING"), f"/jobs/{JOB_ID}/vertices/1")[1]
    assert [s["status"] for s in deploying["subtasks"]] == ["DEPLOYING", "SCHEDULED"]
    assert deploying["metrics"] is None  # no metrics on this endpoint


@pytest.mark.parametrize("vertex", ["7", "x", "1" * 30])
def test_a_vertex_that_is_not_there_is_a_404(vertex):
    status, body = route(full_view(), f"/jobs/{JOB_ID}/vertices/{vertex}")
    assert status == 404 and list(body) == ["errors"]


def test_the_configuration_names_the_job_and_its_spark_ui():
    status, config = route(full_view(), f"/jobs/{JOB_ID}/config")

    assert status == 200
    assert config["jid"] == JOB_ID and config["name"] == "word-count"
    assert config["spark"] == {"master": "local[4]"}
    assert config["spark_ui"] == "http://driver:4040"


def test_the_exceptions_are_newest_first_with_the_restart_strategys_state():
    status, body = route(full_view(), f"/jobs/{JOB_ID}/exceptions", **WITH_TOKEN)

    assert status == 200
    entries = body["exceptionHistory"]["entries"]
    assert [(e["attempt"], e["recovery"]) for e in entries] == [(1, "in-place"), (0, "new-stage")]
    assert entries[0]["taskName"] == "'Reduce -> Sink' (2/2)"
    assert entries[0]["exceptionName"] == "KeyError"
    assert entries[0]["stacktrace"].startswith("Traceback")
    assert body["root-exception"] == entries[0]["root_cause"]
    state = body["restart_strategy"]
    assert (state["type"], state["restarts"], state["limit"]) == ("failure-rate", 2, 3)
    assert (state["next_delay_ms"], state["last_delay_ms"]) == (200, 200)
    assert state["failures_in_window"] == 1  # the older one left the 60 s window


def test_without_failures_the_history_is_empty():
    view = full_view(exceptions=(), restart_strategy={"type": "no-restart"})
    body = route(view, f"/jobs/{JOB_ID}/exceptions", **WITH_TOKEN)[1]
    assert body["exceptionHistory"] == {"entries": [], "truncated": False}
    assert body["root-exception"] is None
    assert body["restart_strategy"] == {
        "type": "no-restart", "restarts": 0, "last_delay_ms": None, "limit": 0,
        "next_delay_ms": None,
    }  # fmt: skip


def test_the_overview_counts_the_one_job_by_state():
    assert route(full_view(), "/overview")[1]["jobs-running"] == 1
    ended = route(full_view(state="FAILED"), "/overview")[1]
    assert (ended["jobs-running"], ended["jobs-failed"]) == (0, 1)


def test_the_openapi_spec_is_served_even_before_the_first_view():
    status, spec = route(None, "/openapi.json")
    assert status == 200 and spec["openapi"].startswith("3.")
    example = route(full_view(), "/openapi.json")[1]["paths"]["/jobs/{job_id}"]["get"]
    assert example["parameters"][0]["example"] == JOB_ID


# ---- over a socket: what http.server would refuse in HTML ---------------------------------------


@pytest.fixture
def server():
    server = RestServer("127.0.0.1", 0, lambda: full_view(), WITH_TOKEN["control"])
    yield server
    server.close()


def raw(server: RestServer, request: bytes) -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(server.address, timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(
    "request_bytes, status",
    [
        (b"OPTIONS /jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405),
        (b"BREW /jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 405),
        (b"GET /jobs HTTP/1.1\r\n" + b"X-A: b\r\n" * 101 + b"\r\n", 431),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414),
    ],
    ids=["options", "unknown-method", "too-many-headers", "uri-too-long"],
)
def test_what_http_server_refuses_is_a_json_error_never_html(server, request_bytes, status):
    code, headers, body = raw(server, request_bytes)

    assert code == status
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert list(json.loads(body)) == ["errors"]


def test_a_percent_encoded_traversal_in_any_path_is_a_json_404(server):
    code, _headers, body = raw(
        server,
        f"GET /jobs/{JOB_ID}/logs/%2e%2e%2f%2e%2e%2fetc%2fpasswd HTTP/1.1\r\n"
        "Host: 127.0.0.1\r\nAuthorization: Bearer t\r\nConnection: close\r\n\r\n".encode(),
    )
    assert code == 404 and json.loads(body)["errors"]
