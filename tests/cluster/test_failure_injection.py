"""`barrierflow chaos` asks the JobMaster to make a task fail: the request reaches the task of
the attempt it was aimed at, and is dropped once that attempt is no longer current. The kinds
restore and storage also arm the next attempt's restore (cluster/chaos_faults.py): fake RPC,
fake Spark runner, ManualClock, a real checkpoint folder."""

from __future__ import annotations

import pytest
from job_master_builder import PARTITIONS, JobHarness, failure, job_master_builder

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.cluster.chaos_faults import READ_FAULTS
from barrierflow.cluster.mails import FailureInjectionRequested
from barrierflow.errors import ChaosFailure, CheckpointStorageError
from barrierflow.runtime import task_messages as msg


def test_a_requested_failure_reaches_the_task_of_the_current_attempt(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    target = job.master.partitions[PARTITIONS[-1]]

    job.post(FailureInjectionRequested(0, target, "injected"))

    assert job.tasks[PARTITIONS[-1]].sent_of(msg.InjectFailure) == [
        msg.InjectFailure(0, "injected")
    ]
    for partition in PARTITIONS[:-1]:
        assert job.tasks[partition].sent_of(msg.InjectFailure) == []


def test_a_failure_aimed_at_an_ended_attempt_is_dropped(tmp_path):
    job = job_master_builder(tmp_path, RestartStrategies.fixed_delay_restart(3, 0))
    job.run_all()
    job.send(0, msg.TaskFailed(0, 0, failure(ChaosFailure("first"))))  # attempt 0 rolls back
    job.advance(1)
    job.run_all(attempt=1)
    target = job.master.partitions[0]

    job.post(FailureInjectionRequested(0, target, "too late"))

    assert job.master.status.attempt == 1
    assert job.tasks[0].sent_of(msg.InjectFailure) == []


def _with_checkpoint_7(tmp_path) -> JobHarness:
    """A started job whose folder holds checkpoint 7: every attempt restores it."""
    job = JobHarness(tmp_path, RestartStrategies.fixed_delay_restart(10, 0))
    job.master.storage.prepare()
    job.master.storage.write_metadata(7, build_metadata(job.master.graph, 7, 1007, False, {}))
    return job.start()


def _deployed(job: JobHarness, partition: int) -> msg.DeployTask:
    return job.tasks[partition].sent_of(msg.DeployTask)[-1]


def test_a_restore_failure_hits_the_aimed_task_of_the_next_attempt_once_and_never_ends_the_job(
    tmp_path,
):
    job = _with_checkpoint_7(tmp_path)
    job.run_all()
    aimed = PARTITIONS[-1]
    for attempt in (0, 2):  # twice in a row from checkpoint 7: still no reason to give up
        subtask = job.master.partitions[aimed]
        job.post(FailureInjectionRequested(attempt, subtask, f"injected {attempt}", "restore"))
        assert job.tasks[aimed].sent_of(msg.InjectFailure)[-1].attempt == attempt
        job.send(aimed, msg.TaskFailed(attempt, aimed, failure(ChaosFailure("injected"))))
        job.advance(1)
        job.register_all(attempt + 1)

        reason = _deployed(job, aimed).fail_restore
        assert reason == f"injected {attempt}, while restoring"
        assert [_deployed(job, p).fail_restore for p in PARTITIONS[:-1]] == [None] * 3
        job.send(aimed, msg.TaskFailed(attempt + 1, aimed, failure(ChaosFailure(reason), "Sink")))
        job.advance(1)
        job.run_all(attempt + 2)

        assert (job.master.status.state, job.master.status.attempt) == ("RUNNING", attempt + 2)
        assert _deployed(job, aimed).fail_restore is None  # used once
        assert job.master.status.restored_from == 7


def test_a_storage_failure_arms_every_tasks_next_restore_and_the_drivers_metadata(tmp_path):
    job = _with_checkpoint_7(tmp_path)
    job.run_all()
    aimed = PARTITIONS[0]

    job.post(FailureInjectionRequested(0, job.master.partitions[aimed], "injected", "storage"))
    faults = job.master.chaos.storage
    assert (faults.left("read"), faults.left("write")) == (READ_FAULTS, 1)
    job.send(aimed, msg.TaskFailed(0, aimed, failure(ChaosFailure("injected"))))
    job.advance(1)  # attempt 1 reads checkpoint 7's _metadata: the retries absorb the faults
    job.run_all(attempt=1)

    assert job.master.status.state == "RUNNING"
    assert job.master.status.restored_from == 7
    assert faults.left("read") == 0
    assert [_deployed(job, p).read_faults for p in PARTITIONS] == [READ_FAULTS] * 4
    metadata = build_metadata(job.master.graph, 8, 1008, False, {})
    with pytest.raises(CheckpointStorageError, match="injected by barrierflow chaos"):
        job.master.storage.write_metadata(8, metadata)
    job.master.storage.write_metadata(8, metadata)  # once only

    job.send(aimed, msg.TaskFailed(1, aimed, failure(ChaosFailure("later"))))
    job.advance(1)
    job.run_all(attempt=2)
    assert [_deployed(job, p).read_faults for p in PARTITIONS] == [0] * 4
