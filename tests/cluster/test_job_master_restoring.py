"""The JobMaster restoring: the restore point each attempt takes, the fallback past a damaged
checkpoint (found by the driver or by a task), the job failing with the file named when no
intact checkpoint is left, no loop on a repeated restore failure, and claim / no-claim.
Fake RPC, fake Spark runner, ManualClock (issue 11, "Bad checkpoints")."""

from __future__ import annotations

import logging
import shutil

import pytest
from job_master_builder import COUNTERS, INTERVAL_MS, PARTITIONS, JobHarness, failure

from barrierflow import _fs
from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.files import file_error
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.cluster.jobmaster.restore_point import SavepointRestoreSettings
from barrierflow.errors import JobExecutionError, StateRestoreError
from barrierflow.runtime import task_messages as msg


def harness(tmp_path, checkpoints=(), restart=None, restore=None) -> JobHarness:
    """A JobMaster whose checkpoint folder holds completed (stateless) `checkpoints`."""
    job = JobHarness(tmp_path, restart or RestartStrategies.fixed_delay_restart(3, 500))
    job.master.settings.savepoint_restore = restore
    storage = job.master.storage
    storage.prepare()
    for n in checkpoints:
        storage.write_metadata(n, build_metadata(job.master.graph, n, 1000 + n, False, {}))
    if restore is not None:  # the restore settings are read when the JobMaster is made
        job.master.__init__(
            job.master.graph,
            job.master.settings,
            clock=job.clock,
            connect_runner=job._connect_runner,
            start_rpc=job._start_rpc,
        )
    return job


def chk(job: JobHarness, n: int):
    return job.master.storage.checkpoint_dir(n)


def restore_error(job: JobHarness, n: int, what: str = "damaged 'subtask-state' file"):
    state_file = chk(job, n).child("2-0-run.state").uri
    return file_error(StateRestoreError(f"{state_file}: {what}"), state_file)


def fail_restoring(job: JobHarness, error: BaseException, attempt: int) -> None:
    """Every task registered; one fails while it restores (before it reports running)."""
    job.register_all(attempt)
    job.send(COUNTERS[0], msg.TaskFailed(attempt, COUNTERS[0], failure(error)))


def restored_ids(job: JobHarness) -> int | None:
    (deploy,) = job.tasks[COUNTERS[0]].sent_of(msg.DeployTask)
    return deploy.restore_checkpoint_id


def test_a_rerun_restores_the_latest_retained_checkpoint(tmp_path):
    job = harness(tmp_path, checkpoints=(5, 6, 7)).start()
    job.register_all()
    assert restored_ids(job) == 7
    assert job.master.status.restored_from == 7


def test_a_task_failing_on_a_damaged_file_falls_back_to_the_previous_checkpoint_at_once(
    tmp_path, caplog
):
    # Before the fix, every attempt restored checkpoint 7 again (121 attempts in 5 minutes).
    job = harness(tmp_path, checkpoints=(5, 6, 7), restart=RestartStrategies.no_restart())
    job.start()
    error = restore_error(job, 7)
    with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_master"):
        fail_restoring(job, error, attempt=0)
        # no restart delay, and the (no-)restart strategy is not asked: it is no job failure
        assert job.master.status.state == "DEPLOYING"
    assert job.master.status.attempt == 1  # in place: the tasks were kept
    job.register_all(attempt=1)
    assert restored_ids(job) == 6
    fallback = [r.getMessage() for r in caplog.records if "instead" in r.getMessage()]
    assert fallback == [
        f"job 'unit-job': checkpoint 7 is damaged ({error}); restoring from checkpoint 6 instead"
    ]
    for partition in PARTITIONS:
        job.send(partition, msg.TaskRunning(1, partition))
    assert job.master.status.state == "RUNNING"


def test_a_damaged_metadata_is_found_by_the_driver_before_any_deployment(tmp_path, caplog):
    job = harness(tmp_path, checkpoints=(6, 7))
    metadata = tmp_path / "checkpoints" / "unit-job" / "chk-7" / "_metadata"
    metadata.write_bytes(metadata.read_bytes()[:-5])
    with caplog.at_level(logging.WARNING):
        job.start()
    job.register_all()
    assert restored_ids(job) == 6
    assert any(
        f"checkpoint 7 is damaged (file://{metadata}: truncated" in r.getMessage()
        and r.getMessage().endswith("restoring from checkpoint 6 instead")
        for r in caplog.records
    )


def test_a_state_file_missing_is_found_by_the_driver(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.no_restart())
    graph, storage = job.master.graph, job.master.storage
    storage.prepare()
    storage.write_metadata(6, build_metadata(graph, 6, 1, False, {}))
    metadata = build_metadata(graph, 7, 2, False, {})
    metadata["operators"]["count"] = {
        "name": "Reduce",
        "parallelism": 2,
        "subtasks": [
            {"subtask": 0, "file": "2-0-r.state", "key_group_range": [0, 63], "keyed": [0, 9]}
        ],
    }
    storage.write_metadata(7, metadata)
    job.start()
    job.register_all()
    assert restored_ids(job) == 6


def test_with_no_intact_checkpoint_left_the_job_fails_naming_the_file(tmp_path):
    job = harness(tmp_path, checkpoints=(7,), restart=RestartStrategies.fixed_delay_restart(9, 0))
    job.start()
    error = restore_error(job, 7)
    fail_restoring(job, error, attempt=0)

    assert job.master.status.state == "FAILED"
    assert job.runner.submitted == [(job.master.spark_group(0), 0)]  # never restored from empty
    with pytest.raises(JobExecutionError) as raised:
        job.master.result()
    assert str(raised.value) == (
        f"job 'unit-job' failed: checkpoint 7 is damaged ({error}); "
        "no intact checkpoint is left to restore from (start from a savepoint with "
        "--from-savepoint, or move the job's checkpoint folder away to start from empty state)"
    )


def test_every_retained_checkpoint_damaged_at_start_is_an_error_naming_them(tmp_path):
    job = harness(tmp_path, checkpoints=(6, 7))
    for n in (6, 7):
        (tmp_path / "checkpoints" / "unit-job" / f"chk-{n}" / "_metadata").write_bytes(b"junk")
    with pytest.raises(StateRestoreError, match="no intact checkpoint") as raised:
        job.start()
    assert "chk-7/_metadata" in str(raised.value) and "chk-6/_metadata" in str(raised.value)
    assert job.master.status.state == "FAILED"


def test_a_restore_failure_repeated_fails_the_job_instead_of_looping(tmp_path):
    restart = RestartStrategies.fixed_delay_restart(99, 100)
    job = harness(tmp_path, checkpoints=(7,), restart=restart).start()
    cause = StateRestoreError("cannot unpickle the value of state 'count'")
    fail_restoring(job, cause, attempt=0)
    assert job.master.status.state == "RESTARTING"  # the restart strategy decides once
    job.advance(100)
    fail_restoring(job, cause, attempt=1)

    assert job.master.status.state == "FAILED"
    assert job.master.status.attempt == 1
    with pytest.raises(JobExecutionError, match="restoring checkpoint 7 failed twice in a row"):
        job.master.result()


def test_a_failure_after_the_job_ran_is_left_to_the_restart_strategy(tmp_path):
    job = harness(tmp_path, checkpoints=(7,), restart=RestartStrategies.fixed_delay_restart(3, 500))
    job.start()
    job.run_all()
    job.send(COUNTERS[0], msg.TaskFailed(0, COUNTERS[0], failure(restore_error(job, 7))))
    assert job.master.status.state == "RESTARTING"
    job.advance(500)
    job.register_all(attempt=1)
    assert restored_ids(job) == 7  # not marked damaged: the job had restored it and ran


def savepoint_of(tmp_path, job_checkpoint: int = 4):
    """A savepoint: a retained checkpoint folder of another run, copied elsewhere."""
    donor = JobHarness(tmp_path / "donor", RestartStrategies.no_restart())
    donor.master.storage.prepare()
    metadata = build_metadata(donor.master.graph, job_checkpoint, 1, False, {}, is_savepoint=True)
    donor.master.storage.write_metadata(job_checkpoint, metadata)
    target = tmp_path / "savepoints" / "savepoint-ab12cd-0123456789ab"
    donor_folder = tmp_path / "donor" / "checkpoints" / "unit-job" / f"chk-{job_checkpoint}"
    shutil.copytree(donor_folder, target)
    return target


def test_a_savepoint_is_restored_first_then_the_checkpoints_of_this_run(tmp_path):
    savepoint = savepoint_of(tmp_path)
    restore = SavepointRestoreSettings.for_path(str(savepoint / "_metadata"))
    job = harness(tmp_path, checkpoints=(8, 9), restore=restore).start()
    job.run_all()
    assert restored_ids(job) == 4  # not the job folder's older checkpoints
    job.advance(INTERVAL_MS)
    (trigger,) = job.tasks[0].sent_of(msg.TriggerCheckpoint)
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(0, partition, trigger.checkpoint_id, None))
    job.lose(COUNTERS[0])
    job.advance(500)
    job.register_all(attempt=1)
    assert restored_ids(job) == trigger.checkpoint_id
    assert (savepoint / "_metadata").exists()  # no-claim: never touched


def test_a_damaged_savepoint_fails_the_job_at_once_naming_the_file(tmp_path):
    savepoint = savepoint_of(tmp_path)
    (savepoint / "_metadata").write_bytes(b"junk")
    restore = SavepointRestoreSettings.for_path(str(savepoint))
    job = harness(tmp_path, checkpoints=(8,), restore=restore)
    with pytest.raises(StateRestoreError, match=f"^cannot restore from savepoint .*{savepoint}"):
        job.start()


def test_in_claim_mode_the_savepoint_goes_once_a_checkpoint_of_this_run_completed(tmp_path):
    savepoint = savepoint_of(tmp_path)
    restore = SavepointRestoreSettings.for_path(str(savepoint), restore_mode="claim")
    job = harness(tmp_path, restore=restore).start()
    job.run_all()
    assert savepoint.exists()
    job.advance(INTERVAL_MS)
    (trigger,) = job.tasks[0].sent_of(msg.TriggerCheckpoint)
    for partition in PARTITIONS:
        job.send(partition, msg.AcknowledgeCheckpoint(0, partition, trigger.checkpoint_id, None))
    assert job.master.status.completed_checkpoints == (trigger.checkpoint_id,)
    assert not savepoint.exists()


def test_a_newer_folder_without_metadata_is_named_when_an_older_checkpoint_restores(
    tmp_path, caplog
):
    job = harness(tmp_path, checkpoints=(5, 6))
    _fs.make_dirs(chk(job, 7))  # its _metadata lost (or it never completed)
    with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_restore"):
        job.start()
        job.register_all()
    assert restored_ids(job) == 6
    assert f"{chk(job, 7)} has no _metadata (it never completed, or its _metadata was lost)" in (
        caplog.text
    )
