"""`barrierflow list/savepoint/stop/cancel` against real REST endpoints of fake jobs: finding a
job by id, prefix or name, the remote `--rest --token`, and every error as one line."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
from click.testing import CliRunner, Result

from barrierflow.checkpoint.stats import (
    CheckpointStatsTracker,
    SubtaskCheckpointStats,
    TaskVertexInfo,
)
from barrierflow.cli import main
from barrierflow.cluster.jobmaster.views import JobView, SavepointOperation
from barrierflow.cluster.registry import JobRegistry
from barrierflow.cluster.rest.startup import JobEndpoint, start_rest_endpoint

COUNT_ID = "4f1c0ffee0000000000000000000aaaa"
JOIN_ID = "4fa0000000000000000000000000bbbb"


class FakeJob:
    """A job's published view and its JobActions: savepoints complete at once, a stop ends
    the job FINISHED and a cancel CANCELED (the view changes as the JobMaster's would)."""

    def __init__(self, job_id: str, name: str, *, checkpoint: bool = False) -> None:
        tracker = CheckpointStatsTracker([TaskVertexInfo(0, "Source", 1)])
        if checkpoint:
            tracker.report_triggered(7, 1_500)
            tracker.report_acknowledged(7, SubtaskCheckpointStats(0, 0, 1_600, state_bytes=1))
            tracker.report_completed(7, 1_600, external_path="/c/chk-7")
        self.view = JobView(job_id, name, "RUNNING", 0, 1_000, 2_000, (), tracker.snapshot())
        self.calls: list[tuple] = []
        self.operations: dict[str, SavepointOperation] = {}
        self.fail_savepoints: str | None = None
        self.endpoint: JobEndpoint | None = None

    def trigger_savepoint(self, target_dir: str | None) -> str:
        return self._savepoint(("savepoint", target_dir), target_dir, stops=False)

    def stop_with_savepoint(self, target_dir: str | None, drain: bool) -> str:
        return self._savepoint(("stop", target_dir, drain), target_dir, stops=True)

    def savepoint_operation(self, trigger_id: str) -> SavepointOperation | None:
        return self.operations.get(trigger_id)

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        self.calls.append(("cancel",))
        self.view = replace(self.view, state="CANCELED")

    def _savepoint(self, call: tuple, target_dir: str | None, *, stops: bool) -> str:
        self.calls.append(call)
        trigger_id = f"trigger-{len(self.calls)}"
        if self.fail_savepoints:
            operation = SavepointOperation(trigger_id, "FAILED", failure=self.fail_savepoints)
        else:
            location = f"{target_dir or '/default'}/savepoint-{self.view.job_id[:6]}-0123456789ab"
            operation = SavepointOperation(trigger_id, "COMPLETED", location=location)
            if stops:
                self.view = replace(self.view, state="FINISHED")
        self.operations[trigger_id] = operation
        return trigger_id


@pytest.fixture
def registry(tmp_path, monkeypatch) -> JobRegistry:
    folder = tmp_path / "jobs"
    monkeypatch.setenv("BARRIERFLOW_REGISTRY_DIR", str(folder))
    return JobRegistry(folder)


@pytest.fixture
def start(registry):
    """start(job_id, name) -> a running FakeJob with a registered endpoint."""
    endpoints: list[JobEndpoint] = []

    def start(job_id: str, name: str, **options) -> FakeJob:
        job = FakeJob(job_id, name, **options)
        endpoint = start_rest_endpoint(
            name, job_id, "127.0.0.1", 0, lambda: job.view, job, f"token-{name}", registry
        )
        assert endpoint is not None
        job.endpoint = endpoint
        endpoints.append(endpoint)
        return job

    yield start
    for endpoint in endpoints:
        endpoint.server.close()


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": "250"})


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()  # progress lines may come before the error
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:], result.stderr
    for fragment in fragments:
        assert fragment in errors[0]
    assert "Traceback" not in result.output


# ---- list --------------------------------------------------------------------------------------


def test_list_shows_each_running_job_with_its_status_uptime_and_last_checkpoint(start):
    start(COUNT_ID, "count", checkpoint=True)
    start(JOIN_ID, "join")

    result = run("list")

    assert result.exit_code == 0, result.output
    header, count, join = result.stdout.splitlines()
    assert header.split() == ["JOB", "ID", "NAME", "STATUS", "UPTIME", "LAST", "CHECKPOINT"]
    assert count.split()[:3] == [COUNT_ID, "count", "RUNNING"]
    assert "#7 (" in count and count.rstrip().endswith("ago)")
    assert join.split()[:3] == [JOIN_ID, "join", "RUNNING"] and join.rstrip().endswith("-")


def test_list_as_json_carries_what_a_remote_command_needs(start):
    job = start(COUNT_ID, "count", checkpoint=True)

    result = run("list", "--json")

    assert result.exit_code == 0, result.output
    (row,) = __import__("json").loads(result.stdout)
    assert row["id"] == COUNT_ID and row["status"] == "RUNNING"
    assert (row["rest"], row["token"]) == (job.endpoint.url, "token-count")
    assert row["last_checkpoint"] == {"id": 7, "completion_timestamp": 1_600}


def test_list_with_no_running_jobs_says_so(registry):
    result = run("list")

    assert (result.exit_code, result.stdout) == (0, "no running jobs on this machine\n")


def test_list_shows_a_job_whose_endpoint_does_not_answer_as_unreachable(start):
    job = start(COUNT_ID, "count")
    job.endpoint.server.close()  # the process lives on (this one), its endpoint is gone

    result = run("list")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].split()[:3] == [COUNT_ID, "count", "UNREACHABLE"]


# ---- finding JOB -------------------------------------------------------------------------------


@pytest.mark.parametrize("query", [COUNT_ID, "4f1c", "count"], ids=["id", "prefix", "name"])
def test_a_job_is_found_by_its_id_a_unique_prefix_or_its_name(start, query, tmp_path):
    job = start(COUNT_ID, "count")
    start(JOIN_ID, "join")

    result = run("savepoint", query, "--dir", str(tmp_path / "sp"))

    assert result.exit_code == 0, result.output
    assert result.stdout == f"{tmp_path}/sp/savepoint-4f1c0f-0123456789ab\n"
    assert job.calls == [("savepoint", str(tmp_path / "sp"))]


def test_an_ambiguous_prefix_is_an_error_listing_the_matches(start):
    start(COUNT_ID, "count")
    start(JOIN_ID, "join")

    result = run("cancel", "4f")

    assert_one_line_error(
        result, "'4f' matches 2 running jobs", f"{COUNT_ID} (count)", f"{JOIN_ID} (join)"
    )


def test_a_wrong_id_is_an_error_listing_the_running_jobs(start):
    start(COUNT_ID, "count")

    result = run("cancel", "nope")

    assert_one_line_error(
        result, "no running job 'nope' on this machine", f"running jobs: {COUNT_ID} (count)"
    )


# ---- savepoint, stop, cancel -------------------------------------------------------------------


def test_savepoint_without_a_folder_uses_the_jobs_default(start):
    job = start(COUNT_ID, "count")

    result = run("savepoint", "count")

    assert result.exit_code == 0, result.output
    assert result.stdout == "/default/savepoint-4f1c0f-0123456789ab\n"
    assert job.calls == [("savepoint", None)]


def test_a_failed_savepoint_is_an_error_with_its_cause(start):
    job = start(COUNT_ID, "count")
    job.fail_savepoints = "checkpoint 4 expired before it completed"

    result = run("savepoint", "count")

    assert_one_line_error(result, "savepoint of job", "checkpoint 4 expired before it completed")


def test_stop_prints_the_savepoint_path_and_waits_until_the_job_ended(start, tmp_path):
    job = start(COUNT_ID, "count")

    result = run("stop", "count", "--savepoint-dir", str(tmp_path), "--drain")

    assert result.exit_code == 0, result.output
    assert result.stdout == f"{tmp_path}/savepoint-4f1c0f-0123456789ab\n"
    assert f"job {COUNT_ID} (count) ended: FINISHED" in result.stderr
    assert job.calls == [("stop", str(tmp_path), True)]


def test_cancel_waits_until_the_job_ended(start):
    job = start(COUNT_ID, "count")

    result = run("cancel", "count")

    assert (result.exit_code, result.stdout) == (
        0,
        f"job {COUNT_ID} (count) cancelled (CANCELED)\n",
    )
    assert job.calls == [("cancel",)]


@pytest.mark.parametrize("command", [["cancel"], ["savepoint"], ["stop"]])
def test_an_action_on_a_job_that_already_finished_is_an_error(start, command):
    job = start(COUNT_ID, "count")
    job.view = replace(job.view, state="FINISHED")  # ended, its endpoint not yet closed

    result = run(*command, "count")

    assert_one_line_error(result, "409", f"job {COUNT_ID} ('count') already ended (FINISHED)")
    assert job.calls == []


def test_a_job_that_ended_and_left_the_registry_is_not_found(start):
    job = start(COUNT_ID, "count")
    job.endpoint.close()

    result = run("cancel", COUNT_ID)

    assert_one_line_error(result, f"no running job '{COUNT_ID}'", "running jobs: none")


# ---- a job elsewhere: --rest URL --token T -----------------------------------------------------


def test_a_job_elsewhere_is_reached_with_rest_and_token(start, registry):
    job = start(COUNT_ID, "count")
    url = job.endpoint.url
    registry.unregister(COUNT_ID)  # not on this machine's list

    result = run("cancel", "count", "--rest", url, "--token", "token-count")

    assert result.exit_code == 0, result.output
    assert job.calls == [("cancel",)]


def test_a_missing_token_is_an_error_that_asks_for_it(start):
    job = start(COUNT_ID, "count")

    result = run("savepoint", COUNT_ID, "--rest", job.endpoint.url)

    assert_one_line_error(
        result, "401", "needs the job's token", "pass the job's token with --token"
    )
    assert job.calls == []


def test_a_wrong_token_is_an_error(start):
    job = start(COUNT_ID, "count")

    result = run("stop", "4f1c", "--rest", job.endpoint.url, "--token", "guess")

    assert_one_line_error(result, "403", "wrong token")
    assert job.calls == []


def test_a_wrong_id_at_a_remote_endpoint_lists_what_it_serves(start):
    job = start(COUNT_ID, "count")

    result = run("cancel", "nope", "--rest", job.endpoint.url, "--token", "token-count")

    assert_one_line_error(result, f"no running job 'nope' at {job.endpoint.url}", COUNT_ID)


def test_an_unreachable_endpoint_is_an_error(registry):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    for args in (["list"], ["cancel", "x", "--token", "t"]):
        result = run(*args, "--rest", f"http://127.0.0.1:{port}")
        assert_one_line_error(result, f"cannot reach http://127.0.0.1:{port}/jobs/overview")


def test_a_missing_job_argument_is_a_usage_error(registry):
    assert run("savepoint").exit_code == 2
