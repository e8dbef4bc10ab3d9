"""The REST client of the command line: waiting is bounded, and a job's endpoint closing while
the client waits for the job to end means it ended."""

from __future__ import annotations

import pytest

from barrierflow.checkpoint.stats import CheckpointStatsTracker
from barrierflow.cli.remote import RemoteJob
from barrierflow.cluster.jobmaster.views import JobView, SavepointOperation
from barrierflow.cluster.rest.server import JobControl, RestServer
from barrierflow.errors import RemoteJobError

JOB_ID = "4f1c0ffee"


class SlowJob:
    """A JobActions whose savepoints never complete."""

    def trigger_savepoint(self, target_dir):
        return "t1"

    def stop_with_savepoint(self, target_dir, drain):
        return "t1"

    def savepoint_operation(self, trigger_id):
        return SavepointOperation(trigger_id, "IN_PROGRESS") if trigger_id == "t1" else None

    def request_cancel(self, reason="cancelled by the user"):
        pass


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def server():
    view = JobView(JOB_ID, "n", "RUNNING", 0, 1, 2, (), CheckpointStatsTracker(()).snapshot())
    server = RestServer("127.0.0.1", 0, lambda: view, JobControl(SlowJob(), "tok"))
    yield server
    server.close()


def test_waiting_for_a_savepoint_gives_up_after_its_bound(server):
    time = FakeTime()
    remote = RemoteJob(server.url, JOB_ID, "tok")

    with pytest.raises(RemoteJobError, match=r"did not complete within 1 s; it may still"):
        remote.wait_for_savepoint("t1", 1.0, sleep=time.sleep, monotonic=time.monotonic)
    assert len(time.slept) == 5  # polled every 0.2 s


def test_waiting_for_a_running_job_to_end_gives_up_after_its_bound(server):
    time = FakeTime()
    remote = RemoteJob(server.url, JOB_ID)

    with pytest.raises(RemoteJobError, match=f"job {JOB_ID} is still RUNNING after 0.4 s"):
        remote.wait_until_ended(0.4, sleep=time.sleep, monotonic=time.monotonic)


def test_a_closed_endpoint_means_the_job_ended(server):
    remote = RemoteJob(server.url, JOB_ID)
    server.close()

    assert remote.wait_until_ended(5.0) is None
