"""A failure at restore that is no damaged checkpoint file, whatever its type, fails the job
once it repeats at the same restore point, instead of looping through the restart strategy
(issue 11, "Bad checkpoints"). The failure is what a task reports when its FileSink cannot
commit a staged file the checkpoint names (the runtime's own restore step builds it); fake
RPC, fake Spark runner, ManualClock."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from job_master_builder import COUNTERS, JobHarness, failure

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.errors import JobExecutionError, SinkError, StateRestoreError
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.operators.base import restore_operator

sys.path.insert(0, str(Path(__file__).parents[1] / "runtime" / "operators"))
from test_restore_failures import sink_with_its_staged_file_gone

EXPONENTIAL = RestartStrategies.exponential_delay_restart(1000, 60_000, 1.5, 3_600_000, 0.0)
"""The default with checkpoints, without jitter: the first restart comes after 1 s."""


def sink_restore_failure(tmp_path: Path) -> BaseException:
    """What the sink's task raises while it restores checkpoint 7 with its staged file gone."""
    sink, restored = sink_with_its_staged_file_gone(tmp_path / "sink-out")
    try:
        restore_operator(sink, restored)
    except Exception as error:
        return error
    raise AssertionError("the sink restored although its staged file is gone")


def fail_restoring(job: JobHarness, error: BaseException, attempt: int) -> None:
    """Every task registered; one fails while it restores (before it reports running)."""
    job.register_all(attempt)
    job.send(COUNTERS[0], msg.TaskFailed(attempt, COUNTERS[0], failure(error, "Sink")))


def test_a_sink_failing_the_same_way_twice_at_restore_fails_the_job_with_its_cause(tmp_path):
    job = JobHarness(tmp_path, EXPONENTIAL)
    job.master.storage.prepare()
    job.master.storage.write_metadata(7, build_metadata(job.master.graph, 7, 1007, False, {}))
    job.start()
    error = sink_restore_failure(tmp_path)

    fail_restoring(job, error, attempt=0)
    assert job.master.status.state == "RESTARTING"  # the restart strategy decides once
    job.advance(1000)
    fail_restoring(job, error, attempt=1)

    assert job.master.status.state == "FAILED"
    assert job.master.status.attempt == 1
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    message = str(raised.value)
    assert message.startswith(
        "job 'unit-job' failed: restoring checkpoint 7 failed twice in a row: StateRestoreError: "
        "Sink (sink) failed while restoring its state: SinkError: cannot commit "
    )
    assert "is missing (task " in message
    task_error = raised.value.__cause__.__cause__  # the error the sink's task reported
    assert isinstance(task_error, StateRestoreError)
    assert str(task_error).startswith("Sink (sink) failed while restoring its state: SinkError")


def test_the_sink_error_as_the_task_raises_it_is_a_restore_failure_from_the_sink_error(tmp_path):
    error = sink_restore_failure(tmp_path)
    assert isinstance(error, StateRestoreError)
    assert isinstance(error.__cause__, SinkError)
