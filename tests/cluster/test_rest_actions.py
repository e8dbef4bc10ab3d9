"""The REST endpoint's actions, through the pure `route`: Flink's shapes, the token (401/403),
an unknown job (404), a job that ended (409), bad bodies (400); and over a socket, the
Authorization header and the stop's result outliving the job."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from barrierflow.checkpoint.stats import CheckpointStatsTracker
from barrierflow.cluster.jobmaster.views import JobView, SavepointOperation
from barrierflow.cluster.registry import JobRegistry
from barrierflow.cluster.rest.server import JobControl, RestServer, route
from barrierflow.cluster.rest.startup import start_rest_endpoint
from barrierflow.errors import BarrierflowError, ConfigurationError

JOB_ID = "4f1c0ffee"
TOKEN = "s3cret-token"
AUTH = f"Bearer {TOKEN}"


class RecordingJobActions:
    """A JobActions that records each call and answers from `operations`."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.operations: dict[str, SavepointOperation] = {}
        self.refusal: Exception | None = None

    def trigger_savepoint(self, target_dir: str | None) -> str:
        return self._call("savepoint", target_dir)

    def stop_with_savepoint(self, target_dir: str | None, drain: bool) -> str:
        return self._call("stop", target_dir, drain)

    def savepoint_operation(self, trigger_id: str) -> SavepointOperation | None:
        return self.operations.get(trigger_id)

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        self._call("cancel", reason)

    def _call(self, *call) -> str:
        if self.refusal is not None:
            raise self.refusal
        self.calls.append(call)
        trigger_id = f"t{len(self.calls)}"
        self.operations[trigger_id] = SavepointOperation(trigger_id, "IN_PROGRESS")
        return trigger_id


def view(state: str = "RUNNING") -> JobView:
    return JobView(
        JOB_ID, "word-count", state, 0, 1_000, 2_000, (), CheckpointStatsTracker(()).snapshot()
    )


@pytest.fixture
def actions() -> RecordingJobActions:
    return RecordingJobActions()


def act(actions, method, path, body=None, authorization=AUTH, state="RUNNING"):
    data = None if body is None else json.dumps(body).encode()
    control = JobControl(actions, TOKEN)
    return route(
        view(state), path, method=method, body=data, authorization=authorization, control=control
    )


# ---- Flink's shapes ----------------------------------------------------------------------------


def test_triggering_a_savepoint_answers_202_with_the_trigger_id(actions):
    answer = act(actions, "POST", f"/jobs/{JOB_ID}/savepoints", {"target-directory": "/sp"})

    assert answer == (202, {"request-id": "t1"})
    assert actions.calls == [("savepoint", "/sp")]


def test_a_savepoint_without_a_body_goes_to_the_jobs_default_folder(actions):
    assert act(actions, "POST", f"/jobs/{JOB_ID}/savepoints")[0] == 202
    assert actions.calls == [("savepoint", None)]


def test_stop_with_savepoint_takes_flinks_field_names(actions):
    answer = act(actions, "POST", f"/jobs/{JOB_ID}/stop", {"targetDirectory": "/sp", "drain": True})

    assert answer == (202, {"request-id": "t1"})
    assert actions.calls == [("stop", "/sp", True)]


def test_cancel_is_a_patch_with_mode_cancel(actions):
    assert act(actions, "PATCH", f"/jobs/{JOB_ID}?mode=cancel") == (202, {})
    assert actions.calls == [("cancel", "cancelled through the REST endpoint")]


@pytest.mark.parametrize(
    "operation, body",
    [
        (SavepointOperation("t9", "IN_PROGRESS"), {"status": {"id": "IN_PROGRESS"}}),
        (
            SavepointOperation("t9", "COMPLETED", location="/sp/savepoint-4f1c0f-0123456789ab"),
            {
                "status": {"id": "COMPLETED"},
                "operation": {"location": "/sp/savepoint-4f1c0f-0123456789ab"},
            },
        ),
        (
            SavepointOperation("t9", "FAILED", failure="a task declined"),
            {
                "status": {"id": "COMPLETED"},
                "operation": {
                    "failure-cause": {"class": "SavepointFailure", "stack-trace": "a task declined"}
                },
            },
        ),
    ],
    ids=["in-progress", "completed", "failed"],
)
def test_a_savepoint_is_polled_by_its_trigger_id_without_a_token(actions, operation, body):
    actions.operations["t9"] = operation

    assert act(actions, "GET", f"/jobs/{JOB_ID}/savepoints/t9", authorization=None) == (200, body)


def test_an_unknown_trigger_id_is_a_404_naming_it(actions):
    status, body = act(actions, "GET", f"/jobs/{JOB_ID}/savepoints/nope")

    assert status == 404 and "nope" in body["errors"][0]


# ---- refusals ----------------------------------------------------------------------------------

ACTIONS = [
    ("POST", f"/jobs/{JOB_ID}/savepoints"),
    ("POST", f"/jobs/{JOB_ID}/stop"),
    ("PATCH", f"/jobs/{JOB_ID}?mode=cancel"),
]


@pytest.mark.parametrize("method, path", ACTIONS)
def test_an_action_without_a_token_is_a_401_that_says_how_to_send_it(actions, method, path):
    status, body = act(actions, method, path, authorization=None)

    assert status == 401
    assert "Authorization: Bearer <token>" in body["errors"][0]
    assert actions.calls == []


@pytest.mark.parametrize("authorization", ["Bearer wrong", f"Basic {TOKEN}", "Bearer"])
@pytest.mark.parametrize("method, path", ACTIONS)
def test_an_action_with_another_token_is_a_403(actions, method, path, authorization):
    status, body = act(actions, method, path, authorization=authorization)

    assert (status, body) == (403, {"errors": ["wrong token for this job's actions"]})
    assert actions.calls == []


@pytest.mark.parametrize("method, path", ACTIONS)
def test_an_action_on_another_job_id_is_a_404_naming_it(actions, method, path):
    status, body = act(actions, method, path.replace(JOB_ID, "deadbeef"))

    assert status == 404
    assert body["errors"] == [f"job deadbeef not found; this endpoint serves job {JOB_ID}"]


@pytest.mark.parametrize("state", ["FINISHED", "CANCELED", "FAILED"])
@pytest.mark.parametrize("method, path", ACTIONS)
def test_an_action_on_a_job_that_ended_is_a_409(actions, method, path, state):
    status, body = act(actions, method, path, state=state)

    assert status == 409
    assert body["errors"] == [
        f"job {JOB_ID} ('word-count') already ended ({state}): it takes no more actions"
    ]
    assert actions.calls == []


def test_the_savepoint_of_a_job_that_ended_can_still_be_read(actions):
    actions.operations["t1"] = SavepointOperation("t1", "COMPLETED", location="/sp/x")

    assert act(actions, "GET", f"/jobs/{JOB_ID}/savepoints/t1", state="FINISHED")[0] == 200


@pytest.mark.parametrize(
    "path, body, message",
    [
        ("savepoints", b"{not json", "the request body is not JSON"),
        ("savepoints", b"[1]", "must be a JSON object"),
        ("savepoints", b'{"target-directory": 3}', "'target-directory' must be a folder path"),
        ("savepoints", b'{"cancel-job": true}', "cancel-job is not supported"),
        ("stop", b'{"drain": "yes"}', "'drain' must be true or false"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field(actions, path, body, message):
    status, answer = route(
        view(),
        f"/jobs/{JOB_ID}/{path}",
        method="POST",
        body=body,
        authorization=AUTH,
        control=JobControl(actions, TOKEN),
    )

    assert status == 400 and message in answer["errors"][0]
    assert actions.calls == []


def test_another_cancel_mode_is_a_400(actions):
    status, body = act(actions, "PATCH", f"/jobs/{JOB_ID}?mode=stop")

    assert status == 400 and "mode=cancel" in body["errors"][0]


@pytest.mark.parametrize(
    "refusal, status",
    [(ConfigurationError("no savepoint folder"), 400), (BarrierflowError("busy"), 409)],
)
def test_the_jobs_refusal_reaches_the_client_as_one_line(actions, refusal, status):
    actions.refusal = refusal

    answer = act(actions, "POST", f"/jobs/{JOB_ID}/savepoints")

    assert answer == (status, {"errors": [str(refusal)]})


def test_a_method_a_path_does_not_take_is_a_405_naming_those_it_takes(actions):
    assert act(actions, "DELETE", f"/jobs/{JOB_ID}") == (
        405,
        {"errors": [f"DELETE /jobs/{JOB_ID}: use GET, HEAD, PATCH"]},
    )
    assert act(actions, "POST", "/jobs/overview")[0] == 405


def test_without_actions_the_endpoint_stays_read_only():
    assert route(view(), f"/jobs/{JOB_ID}/savepoints", method="POST", authorization=AUTH) == (
        405,
        {"errors": ["read-only: use GET"]},
    )


# ---- over a socket -----------------------------------------------------------------------------


def send(url: str, method: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=b"{}", method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_the_server_reads_the_token_from_the_authorization_header(actions):
    server = RestServer("127.0.0.1", 0, view, JobControl(actions, TOKEN))
    try:
        url = f"{server.url}/jobs/{JOB_ID}/savepoints"
        assert send(url, "POST")[0] == 401
        assert send(url, "POST", {"Authorization": "Bearer nope"})[0] == 403
        assert send(url, "POST", {"Authorization": AUTH}) == (202, {"request-id": "t1"})
    finally:
        server.close()


def test_the_endpoint_registers_the_job_and_unregisters_it_on_close(actions, tmp_path):
    registry = JobRegistry(tmp_path / "jobs")

    endpoint = start_rest_endpoint(
        "word-count", JOB_ID, "127.0.0.1", 0, view, actions=actions, token=TOKEN, registry=registry
    )
    assert endpoint is not None
    (entry,) = registry.entries()
    assert (entry.job_id, entry.name, entry.rest_url, entry.token, entry.start_ms) == (
        JOB_ID,
        "word-count",
        endpoint.url,
        TOKEN,
        1_000,
    )

    endpoint.close()
    assert registry.entries() == []


def test_a_read_only_endpoint_is_not_registered(tmp_path):
    registry = JobRegistry(tmp_path / "jobs")

    endpoint = start_rest_endpoint("word-count", JOB_ID, "127.0.0.1", 0, view, registry=registry)
    assert endpoint is not None
    assert registry.entries() == []
    endpoint.close()


def test_a_stopped_jobs_endpoint_serves_until_the_stops_result_was_read(actions, tmp_path):
    """The endpoint ends with its job; the client that asked for the stop must still get the
    savepoint's path."""
    endpoint = start_rest_endpoint(
        "word-count",
        JOB_ID,
        "127.0.0.1",
        0,
        view,
        actions=actions,
        token=TOKEN,
        registry=JobRegistry(tmp_path / "jobs"),
    )
    assert endpoint is not None
    url = endpoint.url
    assert send(f"{url}/jobs/{JOB_ID}/stop", "POST", {"Authorization": AUTH})[0] == 202
    actions.operations["t1"] = SavepointOperation(
        "t1", "COMPLETED", location="/sp/x", stops_job=True
    )

    assert endpoint.server.control is not None
    assert not endpoint.server.control.wait_for_stop_results(0)  # unread: close would wait

    closing = threading.Thread(target=endpoint.close)
    closing.start()

    with urllib.request.urlopen(f"{url}/jobs/{JOB_ID}/savepoints/t1", timeout=10) as response:
        assert json.loads(response.read())["operation"] == {"location": "/sp/x"}
    closing.join(10)
    assert not closing.is_alive()
