"""A job that ends for good without finishing cleans up its sinks on the driver (real
FileSink, real files; fake tasks and Spark runner)."""

from __future__ import annotations

import os
from pathlib import Path

from job_master_builder import COUNTERS, JobHarness, failure, job_master_builder

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.connectors.base import SinkContext
from barrierflow.runtime import task_messages as msg


def leave_staged_files(job: JobHarness) -> list[str]:
    """What an earlier deployment of the job's FileSink left: staged, never committed."""
    [op] = [op for v in job.master.graph.vertices for op in v.operators if op.transformation.sink]
    for subtask in (0, 1):
        context = SinkContext(op.uid, subtask, 2, 0, "earlier-0", job_name="unit-job")
        writer = op.transformation.sink.create_writer(context)
        writer.restore([])
        writer.write_batch([f"row {subtask}"])
        writer.pre_commit(1)
    return staged(job)


def staged(job: JobHarness) -> list[str]:
    out = Path(job.master.graph.vertices[-1].operators[-1].transformation.sink.output.path)
    return [name for _, _, names in os.walk(out / ".staging") for name in names]


def test_a_cancelled_job_leaves_no_staged_file(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    assert len(leave_staged_files(job)) == 2
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert staged(job) == []


def test_a_failed_job_leaves_no_staged_file(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    assert len(leave_staged_files(job)) == 2
    job.send(COUNTERS[0], msg.TaskFailed(0, COUNTERS[0], failure(ValueError("boom"))))
    assert job.master.status.state == "FAILED"
    assert staged(job) == []


def test_a_job_that_lost_its_lease_touches_nothing(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.no_restart())
    job.run_all()
    assert len(leave_staged_files(job)) == 2
    job.master.lease.mine = None  # as after another run took the folder over
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert len(staged(job)) == 2
