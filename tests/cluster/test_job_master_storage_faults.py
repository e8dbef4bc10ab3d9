"""The JobMaster meeting a fault of checkpoint storage while it restores (issue 21, item 2),
event by event with fakes and a ManualClock: the attempt goes through the restart strategy
(never "damaged", never a fallback, never "failed twice in a row"), the log line says it
was the storage, and the next attempt restores the same, newest checkpoint. Retention
that cannot delete a folder is never fatal."""

from __future__ import annotations

import logging

import pytest
from job_master_builder import COUNTERS, INTERVAL_MS, PARTITIONS, SOURCES, JobHarness, failure

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint import retry
from barrierflow.checkpoint.files import file_error
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.checkpoint.retry import Backoff
from barrierflow.errors import CheckpointStorageUnavailableError, JobExecutionError
from barrierflow.runtime import task_messages as msg


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    """Two tries without a wait: a storage fault outlives the retries after two faults."""
    monkeypatch.setattr(retry, "DEFAULT_BACKOFF", Backoff(attempts=2, first_delay_s=0))


def harness(tmp_path, checkpoints, restart=None) -> JobHarness:
    job = JobHarness(tmp_path, restart or RestartStrategies.fixed_delay_restart(3, 500))
    storage = job.master.storage
    storage.prepare()
    for n in checkpoints:
        storage.write_metadata(n, build_metadata(job.master.graph, n, 1000 + n, False, {}))
    return job


def restored_id(job: JobHarness) -> int | None:
    (deploy,) = job.tasks[COUNTERS[0]].sent_of(msg.DeployTask)
    return deploy.restore_checkpoint_id


def test_unreadable_metadata_at_a_start_restarts_and_restores_the_newest_checkpoint(
    tmp_path, storage_faults, caplog
):
    job = harness(tmp_path, checkpoints=(6, 7))
    storage_faults("read:*/chk-7/_metadata:1:2")  # both tries of the first choice fail

    with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_master"):
        job.start()

    assert job.master.status.state == "RESTARTING"
    (line,) = [r.getMessage() for r in caplog.records if "restart strategy" in r.getMessage()]
    assert line.startswith("job 'unit-job': cannot read checkpoint 7 now (storage error reading")
    assert "injected storage fault" in line
    assert "retrying through the restart strategy" in line and line.endswith("in 500 ms")
    assert not [r for r in caplog.records if "damaged" in r.getMessage()]

    job.advance(500)
    job.register_all(attempt=1)
    assert restored_id(job) == 7  # the same, newest one: nothing was marked damaged
    assert job.master.restoring.chooser.damaged == {}


def test_a_storage_fault_that_lasts_ends_the_job_as_the_restart_strategy_says(
    tmp_path, storage_faults
):
    job = harness(tmp_path, checkpoints=(7,), restart=RestartStrategies.no_restart())
    storage_faults("read:*/chk-7/_metadata:1:2")

    job.start()

    assert job.master.status.state == "FAILED"
    with pytest.raises(JobExecutionError, match="cannot read checkpoint 7 now"):
        job.master.result()


def test_a_task_failing_on_a_storage_fault_restores_the_same_checkpoint_every_time(tmp_path):
    job = harness(tmp_path, checkpoints=(6, 7)).start()
    state_file = job.master.storage.checkpoint_dir(7).child("2-0-run.state")
    error = file_error(
        CheckpointStorageUnavailableError(f"storage error reading {state_file}: SLOW_DOWN"),
        state_file,
    )
    for attempt in range(3):  # more than "twice in a row", and no fallback
        job.register_all(attempt)
        assert restored_id(job) == 7
        job.send(COUNTERS[0], msg.TaskFailed(attempt, COUNTERS[0], failure(error)))
        assert job.master.status.state == "RESTARTING"  # the strategy's delay, counted
        job.advance(500)
    assert job.master.restoring.chooser.damaged == {}


def test_retention_that_cannot_delete_is_not_fatal_and_catches_up(tmp_path, storage_faults):
    job = harness(tmp_path, checkpoints=(1,)).start()
    job.run_all()
    storage_faults("delete:*/chk-1:1")  # the first retention's delete of chk-1 fails

    for checkpoint_id, left in ((2, [1, 2]), (3, [3])):
        job.advance(INTERVAL_MS)
        assert job.trigger_ids(SOURCES[0])[-1] == checkpoint_id
        for partition in PARTITIONS:
            job.send(partition, msg.AcknowledgeCheckpoint(0, partition, checkpoint_id, None))
        assert job.master.status.state == "RUNNING"  # not FAILED on the JobMaster thread
        assert job.master.storage.completed_checkpoint_ids() == left
