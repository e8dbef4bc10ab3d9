"""Savepoints, stop with savepoint and cancel, driven by hand through the JobMaster's actions.

Fake RPC, fake Spark runner, ManualClock: the tasks are the test, answering the JobMaster's
messages as real tasks would.
"""

from __future__ import annotations

import re

import pytest
from job_master_builder import (
    COUNTERS,
    INTERVAL_MS,
    PARTITIONS,
    SOURCES,
    JobHarness,
    job_master_builder,
)

from barrierflow import _fs
from barrierflow.api.environment import JobClient
from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.files import read_checkpoint_file
from barrierflow.checkpoint.storage import METADATA_KIND
from barrierflow.cluster.jobmaster.views import SavepointOperation
from barrierflow.errors import JobExecutionError, SavepointError
from barrierflow.runtime import task_messages as msg


def savepoint_trigger(job: JobHarness) -> msg.TriggerCheckpoint:
    triggers = [t for t in job.tasks[SOURCES[0]].sent_of(msg.TriggerCheckpoint) if t.is_savepoint]
    assert triggers, "no savepoint was triggered"
    return triggers[-1]


def acknowledge_all(job: JobHarness, checkpoint_id: int, attempt: int = 0) -> None:
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(attempt, partition, checkpoint_id, None))


def operation(job: JobHarness, trigger_id: str) -> SavepointOperation:
    found = job.master.savepoint_operation(trigger_id)
    assert found is not None
    return found


def test_a_savepoint_goes_into_its_own_folder_and_completes_while_the_job_runs(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    trigger_id = job.master.trigger_savepoint(str(tmp_path / "savepoints"))
    assert operation(job, trigger_id).status == "IN_PROGRESS"  # published at once
    job.master.drain()

    trigger = savepoint_trigger(job)
    assert not trigger.is_final
    assert trigger.target is not None
    assert re.fullmatch(
        rf"savepoint-{job.master.job_id[:6]}-[0-9a-f]{{12}}", trigger.target.rsplit("/", 1)[1]
    )
    assert trigger.target.startswith(_fs.location(tmp_path / "savepoints").uri)
    assert job.trigger_ids(SOURCES[1])[-1] == trigger.checkpoint_id  # every source

    acknowledge_all(job, trigger.checkpoint_id)
    done = operation(job, trigger_id)
    assert (done.status, done.location, done.stops_job) == ("COMPLETED", trigger.target, False)
    folder = _fs.Location(trigger.target)
    metadata, _ = read_checkpoint_file(folder.child("_metadata"), METADATA_KIND)
    assert metadata["is_savepoint"] and metadata["checkpoint_id"] == trigger.checkpoint_id
    assert not (tmp_path / "checkpoints" / "unit-job" / f"chk-{trigger.checkpoint_id}").exists()
    assert job.master.status.completed_checkpoints == ()  # a savepoint is not a checkpoint
    (stats,) = job.master.checkpoint_stats
    assert stats.external_path == trigger.target and stats.is_savepoint
    assert job.master.status.state == "RUNNING"
    for partition in PARTITIONS:
        complete = job.tasks[partition].sent_of(msg.NotifyCheckpointComplete)
        assert complete == [msg.NotifyCheckpointComplete(0, trigger.checkpoint_id, False)]


def test_the_default_target_is_the_savepoints_folder_of_the_checkpoint_storage(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.master.trigger_savepoint(None)
    job.master.drain()
    target = savepoint_trigger(job).target
    assert target is not None
    assert target.startswith(_fs.location(tmp_path / "checkpoints" / "savepoints").uri + "/")


def test_a_declined_savepoint_fails_its_operation_and_folder_but_never_the_job(tmp_path):
    job = job_master_builder(tmp_path)  # tolerable checkpoint failures: 0
    job.run_all()
    first = job.master.trigger_savepoint(str(tmp_path / "sp"))
    job.master.drain()
    trigger = savepoint_trigger(job)
    job.send(
        COUNTERS[1],
        msg.DeclineCheckpoint(
            0, COUNTERS[1], trigger.checkpoint_id, "CHECKPOINT_ASYNC_EXCEPTION", "disk full"
        ),
    )
    failed = operation(job, first)
    assert failed.status == "FAILED"
    assert failed.failure is not None and "disk full" in failed.failure
    assert "Reduce -> Sink' (2/2)" in failed.failure
    assert not _fs.exists(_fs.Location(trigger.target))
    assert (job.master.status.state, job.master.status.attempt) == ("RUNNING", 0)
    assert job.master.attempt.checkpoints.coordinator.consecutive_failures == 0
    # the next periodic checkpoint still runs and completes
    job.advance(INTERVAL_MS)
    periodic = job.trigger_ids(SOURCES[0])[-1]
    acknowledge_all(job, periodic)
    assert job.master.status.completed_checkpoints == (periodic,)


def test_a_savepoint_asked_while_the_job_is_not_running_fails_with_the_reason(tmp_path):
    job = job_master_builder(tmp_path)
    deploying = job.master.trigger_savepoint(None)
    stopping = job.master.stop_with_savepoint(None, drain=False)
    job.master.drain()
    for trigger_id in (deploying, stopping):
        refused = operation(job, trigger_id)
        assert refused.status == "FAILED"
        assert "the job is DEPLOYING" in (refused.failure or "")
    job.run_all()
    assert job.trigger_ids(SOURCES[0]) == []  # nothing was left waiting to trigger
    for partition in SOURCES:  # every input ended: the job is finishing
        job.send(partition, msg.EndOfInput(0, partition))
    finishing = job.master.trigger_savepoint(None)
    job.master.drain()
    assert "finishing" in (operation(job, finishing).failure or "")


def test_an_unwritable_target_fails_the_savepoint_before_anything_triggers(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    trigger_id = job.master.trigger_savepoint(str(blocker))
    job.master.drain()
    refused = operation(job, trigger_id)
    assert refused.status == "FAILED" and "not writable" in (refused.failure or "")
    assert job.trigger_ids(SOURCES[0]) == []


def test_a_savepoint_asked_after_the_job_ended_fails_at_once(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    job.master.request_cancel()
    job.master.drain()
    trigger_id = job.master.trigger_savepoint(None)
    assert operation(job, trigger_id).status == "FAILED"


def test_stop_with_savepoint_stops_the_sources_takes_the_final_savepoint_and_finishes(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    trigger_id = job.master.stop_with_savepoint(str(tmp_path / "sp"), drain=True)
    job.master.drain()
    for partition in SOURCES:
        assert job.tasks[partition].sent_of(msg.StopSources) == [msg.StopSources(0, True)]
    for partition in COUNTERS:
        assert job.tasks[partition].sent_of(msg.StopSources) == []

    second = job.master.stop_with_savepoint(None, drain=False)
    plain = job.master.trigger_savepoint(None)
    job.master.drain()
    for refused in (second, plain):
        assert "a stop with savepoint is under way" in (operation(job, refused).failure or "")

    for partition in SOURCES:  # the sources ended their input
        job.send(partition, msg.EndOfInput(0, partition))
    trigger = savepoint_trigger(job)
    assert trigger.is_final and trigger.target is not None
    acknowledge_all(job, trigger.checkpoint_id)
    for partition in PARTITIONS:
        assert job.tasks[partition].sent_of(msg.NotifyCheckpointComplete) == [
            msg.NotifyCheckpointComplete(0, trigger.checkpoint_id, True)
        ]
    assert job.master.status.state == "FINISHING"
    assert operation(job, trigger_id).status == "IN_PROGRESS"  # until the job ended

    for partition in PARTITIONS:
        job.send(partition, msg.TaskFinished(0, partition))
    job.end_spark_job(0)
    assert job.master.status.state == "FINISHED"
    done = operation(job, trigger_id)
    assert (done.status, done.location, done.stops_job) == ("COMPLETED", trigger.target, True)
    assert _fs.exists(_fs.Location(trigger.target).child("_metadata"))
    job.master.result()  # finished, no error


def test_a_stop_whose_savepoint_fails_fails_over_and_the_sources_resume(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    trigger_id = job.master.stop_with_savepoint(str(tmp_path / "sp"), drain=False)
    job.master.drain()
    for partition in SOURCES:
        job.send(partition, msg.EndOfInput(0, partition))
    trigger = savepoint_trigger(job)
    job.send(
        COUNTERS[0],
        msg.DeclineCheckpoint(0, COUNTERS[0], trigger.checkpoint_id, "CHECKPOINT_DECLINED", "no"),
    )
    failed = operation(job, trigger_id)
    assert failed.status == "FAILED" and failed.stops_job
    assert failed.failure == (
        "stop with savepoint failed: savepoint 1 failed: a task declined the checkpoint "
        "(task 'Reduce -> Sink' (1/2): no)"
    )
    assert job.master.status.state == "RESTARTING"  # the attempt fails over
    assert not _fs.exists(_fs.Location(trigger.target))
    assert all(conn.sent_of(msg.EndAttempt) for conn in job.tasks.values())

    job.advance(500)  # the restart delay: attempt 1 runs in the same processes
    job.run_all(attempt=1)
    assert job.master.status.state == "RUNNING"
    for partition in SOURCES:  # the new attempt's sources are not told to stop
        assert job.tasks[partition].sent_of(msg.StopSources) == []
    job.advance(INTERVAL_MS)
    last = job.tasks[SOURCES[0]].sent_of(msg.TriggerCheckpoint)[-1]
    assert (last.attempt, last.is_final, last.is_savepoint) == (1, False, False)
    again = job.master.trigger_savepoint(None)  # a stop is no longer under way
    job.master.drain()
    assert operation(job, again).status == "IN_PROGRESS"


def complete_checkpoint(job: JobHarness) -> int:
    job.advance(INTERVAL_MS)
    checkpoint_id = job.trigger_ids(SOURCES[0])[-1]
    acknowledge_all(job, checkpoint_id)
    return checkpoint_id


def test_cancel_with_delete_on_cancellation_deletes_the_checkpoints_but_not_savepoints(tmp_path):
    job = job_master_builder(tmp_path)
    job.master.settings.externalized_retention = "DELETE_ON_CANCELLATION"
    job.run_all()
    checkpoint_id = complete_checkpoint(job)
    chk = tmp_path / "checkpoints" / "unit-job" / f"chk-{checkpoint_id}"
    assert (chk / "_metadata").exists()
    job.master.trigger_savepoint(str(tmp_path / "sp"))
    job.master.drain()
    acknowledge_all(job, savepoint_trigger(job).checkpoint_id)
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert not chk.exists()
    (savepoint,) = (tmp_path / "sp").iterdir()
    assert (savepoint / "_metadata").exists()


def test_cancel_retains_the_checkpoints_by_default(tmp_path):
    job = job_master_builder(tmp_path)
    assert job.master.settings.externalized_retention == "RETAIN_ON_CANCELLATION"
    job.run_all()
    checkpoint_id = complete_checkpoint(job)
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert (tmp_path / "checkpoints" / "unit-job" / f"chk-{checkpoint_id}" / "_metadata").exists()


def test_the_job_client_raises_the_reason_of_a_failed_savepoint(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.no_restart())
    client = JobClient(job.master, None)  # runs the JobMaster on its own thread
    assert job.master.wait_for(lambda s: s.state == "DEPLOYING", timeout=30)
    with pytest.raises(SavepointError, match="the savepoint failed: the job is DEPLOYING"):
        client.trigger_savepoint(str(tmp_path / "sp"), timeout=30).result()
    with pytest.raises(SavepointError, match="stop with savepoint failed: the job is DEPLOYING"):
        client.stop_with_savepoint(drain=True, timeout=30).result()
    client.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        client.wait(timeout=30)
