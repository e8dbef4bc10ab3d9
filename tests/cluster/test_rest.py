"""The REST endpoint over a real loopback socket: every route with a published view, Flink's
error body for what is not there, read-only methods, a newly published view, and the port
setting."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.stats import (
    CheckpointStatsTracker,
    SubtaskCheckpointStats,
    TaskVertexInfo,
)
from barrierflow.cluster.jobmaster.views import JobView, VertexView
from barrierflow.cluster.rest.bodies import checkpoints_json
from barrierflow.cluster.rest.server import RestServer, resolve_rest_port
from barrierflow.errors import ConfigurationError

JOB_ID = "4f1c0ffee"
VERTICES = (TaskVertexInfo(0, "Source: words", 1), TaskVertexInfo(1, "Reduce -> Sink", 2))


def job_view(tracker: CheckpointStatsTracker, state: str = "RUNNING") -> JobView:
    return JobView(
        job_id=JOB_ID,
        name="word-count",
        state=state,
        attempt=1,
        start_ms=1_000,
        published_ms=9_000,
        vertices=(
            VertexView(0, "Source: words", 1, (("src", "Source: words"),)),
            VertexView(1, "Reduce -> Sink", 2, (("count", "Reduce"), ("sink", "Sink"))),
        ),
        checkpoints=tracker.snapshot(),
        checkpoint_config={"interval": 1000, "timeout": 600_000},
        restored_from=3,
    )


def tracker_with_checkpoints() -> CheckpointStatsTracker:
    """Checkpoint 4 completed (three subtasks), 5 expired, 6 in progress."""
    tracker = CheckpointStatsTracker(VERTICES)
    tracker.report_restored(3, 900, external_path="/c/chk-3")
    tracker.report_triggered(4, 2_000)
    for vertex, index, state_bytes in [(0, 0, 10), (1, 0, 200), (1, 1, 300)]:
        tracker.report_acknowledged(
            4, SubtaskCheckpointStats(vertex, index, 2_100, sync_ms=1.0, state_bytes=state_bytes)
        )
    tracker.report_completed(4, 2_105, external_path="/c/chk-4")
    tracker.report_triggered(5, 3_000)
    tracker.report_failed(5, 4_000, CheckpointFailureReason.CHECKPOINT_EXPIRED)
    tracker.report_triggered(6, 5_000)
    return tracker


@pytest.fixture
def served():
    """(server, views): the server answers from views[0]; assign to publish another."""
    views = [job_view(tracker_with_checkpoints())]
    server = RestServer("127.0.0.1", 0, lambda: views[0])
    yield server, views
    server.close()


def get(server: RestServer, path: str, method: str = "GET") -> tuple[int, dict]:
    request = urllib.request.Request(server.url + path, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == "application/json; charset=utf-8"
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        assert error.headers["Content-Type"] == "application/json; charset=utf-8"
        return error.code, json.loads(error.read())


def test_the_server_listens_on_loopback_and_lists_its_job(served):
    server, _ = served
    host, port = server.address
    assert host == "127.0.0.1" and port > 0
    assert server.url == f"http://127.0.0.1:{port}"

    assert get(server, "/jobs") == (200, {"jobs": [{"id": JOB_ID, "status": "RUNNING"}]})
    status, overview = get(server, "/jobs/overview")
    assert status == 200
    assert overview == {
        "jobs": [
            {
                "jid": JOB_ID,
                "name": "word-count",
                "state": "RUNNING",
                "attempt": 1,
                "start-time": 1_000,
                "end-time": -1,
                "duration": 8_000,
                "last-modification": 9_000,
                "tasks": {"total": 3},
            }
        ]
    }


def test_the_job_shows_its_state_attempt_and_vertices_with_their_parallelism(served):
    server, _ = served

    status, job = get(server, f"/jobs/{JOB_ID}")

    assert status == 200
    assert (job["state"], job["attempt"], job["restored_from"]) == ("RUNNING", 1, 3)
    assert [(v["id"], v["name"], v["parallelism"]) for v in job["vertices"]] == [
        (0, "Source: words", 1),
        (1, "Reduce -> Sink", 2),
    ]
    assert job["vertices"][1]["operators"] == [
        {"uid": "count", "name": "Reduce"},
        {"uid": "sink", "name": "Sink"},
    ]


def test_checkpoints_are_the_trackers_snapshot_as_json(served):
    server, views = served

    status, checkpoints = get(server, f"/jobs/{JOB_ID}/checkpoints")

    assert status == 200
    assert checkpoints == json.loads(json.dumps(checkpoints_json(views[0].checkpoints)))
    assert checkpoints["counts"] == {
        "restored": 1,
        "total": 3,
        "in_progress": 1,
        "completed": 1,
        "failed": 1,
    }
    assert [(h["id"], h["status"]) for h in checkpoints["history"]] == [
        (6, "IN_PROGRESS"),
        (5, "FAILED"),
        (4, "COMPLETED"),
    ]
    assert checkpoints["latest"]["restored"]["id"] == 3
    assert checkpoints["summary"]["state_size"]["max"] == 510
    assert get(server, f"/jobs/{JOB_ID}/checkpoints/config")[1] == {
        "interval": 1000,
        "timeout": 600_000,
    }


def test_the_details_of_a_checkpoint_show_every_subtask(served):
    server, _ = served

    status, details = get(server, f"/jobs/{JOB_ID}/checkpoints/details/4")

    assert status == 200
    assert (details["id"], details["status"], details["state_size"]) == (4, "COMPLETED", 510)
    sink = details["tasks"]["1"]
    assert [(s["index"], s["status"], s["state_size"]) for s in sink["subtasks"]] == [
        (0, "completed", 200),
        (1, "completed", 300),
    ]
    assert get(server, f"/jobs/{JOB_ID}/checkpoints/details/4/subtasks/1") == (200, sink)
    expired = get(server, f"/jobs/{JOB_ID}/checkpoints/details/5/")[1]  # a trailing slash is fine
    assert expired["failure_reason"] == "CHECKPOINT_EXPIRED"
    assert [s["status"] for s in expired["tasks"]["1"]["subtasks"]] == ["pending_or_failed"] * 2


@pytest.mark.parametrize(
    "path, message",
    [
        ("/nope", "not found: /nope"),
        ("/jobs/other", f"job other not found; this endpoint serves job {JOB_ID}"),
        ("/jobs/other/checkpoints", "job other not found"),
        (f"/jobs/{JOB_ID}/checkpoints/details/77", "checkpoint 77 of job"),
        (f"/jobs/{JOB_ID}/checkpoints/details/4/subtasks/9", "has no vertex 9"),
        (f"/jobs/{JOB_ID}/checkpoints/details/x", "not found"),
    ],
    ids=["path", "job", "job-checkpoints", "checkpoint", "vertex", "non-numeric-id"],
)
def test_what_is_not_there_is_a_404_with_a_json_message(served, path, message):
    server, _ = served

    status, body = get(server, path)

    assert status == 404
    assert list(body) == ["errors"] and message in body["errors"][0]


def test_the_endpoint_is_read_only(served):
    server, _ = served

    assert get(server, "/jobs", method="POST") == (405, {"errors": ["read-only: use GET"]})
    assert get(server, f"/jobs/{JOB_ID}", method="DELETE")[0] == 405


def test_a_newly_published_view_is_what_the_next_request_sees(served):
    server, views = served
    tracker = tracker_with_checkpoints()
    tracker.report_acknowledged(6, SubtaskCheckpointStats(0, 0, 5_050, state_bytes=1))

    views[0] = job_view(tracker, state="FINISHING")

    assert get(server, "/jobs")[1]["jobs"][0]["status"] == "FINISHING"
    in_progress = get(server, f"/jobs/{JOB_ID}/checkpoints/details/6")[1]
    assert in_progress["num_acknowledged_subtasks"] == 1


def test_before_the_first_view_the_endpoint_answers_503():
    server = RestServer("127.0.0.1", 0, lambda: None)
    try:
        assert get(server, "/jobs/overview") == (503, {"errors": ["the job is starting"]})
    finally:
        server.close()


def test_closing_the_server_releases_its_port():
    server = RestServer("127.0.0.1", 0, lambda: None)
    address = server.address
    server.close()

    with pytest.raises(OSError), socket.create_connection(address, timeout=2):
        pass
    RestServer(*address, lambda: None).close()  # the port can be taken again


@pytest.mark.parametrize(
    "setting, environment, port",
    [
        (None, {}, 0),
        (None, {"BARRIERFLOW_REST_PORT": ""}, 0),
        (None, {"BARRIERFLOW_REST_PORT": "0"}, 0),
        (None, {"BARRIERFLOW_REST_PORT": "8081"}, 8081),
        (None, {"BARRIERFLOW_REST_PORT": "off"}, None),
        (None, {"BARRIERFLOW_REST_PORT": "OFF"}, None),
        (9000, {"BARRIERFLOW_REST_PORT": "8081"}, 9000),
        ("off", {"BARRIERFLOW_REST_PORT": "8081"}, None),
    ],
    ids=["unset", "empty", "zero", "number", "off", "off-upper", "setting-wins", "setting-off"],
)
def test_the_port_comes_from_the_setting_or_the_environment(setting, environment, port):
    assert resolve_rest_port(setting, environment) == port


@pytest.mark.parametrize("value", ["-1", "65536", "eighty", "80.5"])
def test_a_bad_port_is_a_configuration_error(value):
    with pytest.raises(ConfigurationError, match="BARRIERFLOW_REST_PORT"):
        resolve_rest_port(None, {"BARRIERFLOW_REST_PORT": value})
