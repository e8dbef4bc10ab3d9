"""Checkpoint ids never go back, the checkpoint folder's lineage, what each restore abandons,
and a fallback past a damaged checkpoint that a sink cannot take back (issue 21, items 1
and 6). Fake RPC, fake Spark runner, ManualClock."""

from __future__ import annotations

import logging
import shutil
from typing import Any

import pytest
from job_master_builder import COUNTERS, INTERVAL_MS, PARTITIONS, JobHarness
from pyspark import cloudpickle

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.lineage import LINEAGE_FILE
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsStatus
from barrierflow.cluster.jobmaster.restore_point import SavepointRestoreSettings
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.errors import StateRestoreError
from barrierflow.runtime import task_messages as msg

SAVEPOINT_ID = 40


class Inserts(TwoPhaseCommitSink[int]):
    """A transactional sink that cannot take back what it committed (never runs here)."""

    def begin_transaction(self) -> int:
        return 0

    def write(self, transaction: int, records: list[Any]) -> None:
        pass

    def pre_commit(self, transaction: int, checkpoint_id: int) -> None:
        pass

    def commit(self, transaction: int) -> None:
        pass

    def abort(self, transaction: int) -> None:
        pass


def harness(tmp_path, checkpoints=(), restore=None, sink=None, allow=False) -> JobHarness:
    """A JobMaster whose checkpoint folder holds completed (stateless) `checkpoints`."""
    job = JobHarness(tmp_path, RestartStrategies.fixed_delay_restart(3, 500), sink=sink)
    settings = job.master.settings
    settings.savepoint_restore = restore
    settings.allow_fallback_duplicates = allow
    storage = job.master.storage
    storage.prepare()
    for n in checkpoints:
        storage.write_metadata(n, build_metadata(job.master.graph, n, 1000 + n, False, {}))
    job.master.__init__(  # the restore settings are read when the JobMaster is made
        job.master.graph,
        settings,
        clock=job.clock,
        connect_runner=job._connect_runner,
        start_rpc=job._start_rpc,
    )
    return job


def savepoint_of(tmp_path, checkpoint_id: int = SAVEPOINT_ID):
    """A savepoint of another run (another storage), copied to its own folder."""
    donor = JobHarness(tmp_path / "donor", RestartStrategies.no_restart())
    donor.master.storage.prepare()
    metadata = build_metadata(donor.master.graph, checkpoint_id, 1, False, {}, is_savepoint=True)
    donor.master.storage.write_metadata(checkpoint_id, metadata)
    target = tmp_path / "savepoints" / "savepoint-ab12cd-0123456789ab"
    shutil.copytree(tmp_path / "donor" / "checkpoints" / "unit-job" / f"chk-{checkpoint_id}",
                    target)  # fmt: skip
    return target


def deployed(job: JobHarness) -> msg.DeployTask:
    (deploy,) = job.tasks[COUNTERS[0]].sent_of(msg.DeployTask)
    return deploy


def complete_checkpoint(job: JobHarness, attempt: int = 0) -> int:
    job.advance(INTERVAL_MS)
    trigger = job.tasks[0].sent_of(msg.TriggerCheckpoint)[-1]
    for partition in PARTITIONS:
        job.send(
            partition, msg.AcknowledgeCheckpoint(attempt, partition, trigger.checkpoint_id, None)
        )
    return trigger.checkpoint_id


def task_lineage(job: JobHarness) -> str:
    _, settings = cloudpickle.loads(job.runner.payloads[-1])
    return settings.lineage


def test_a_savepoint_restored_into_an_empty_folder_numbers_above_it(tmp_path):
    # Before the fix the run numbered from 1 again: Delta skipped the commits of checkpoints
    # whose ids its table already held, PostgreSQL committed leftovers by id.
    restore = SavepointRestoreSettings.for_path(str(savepoint_of(tmp_path)))
    job = harness(tmp_path, restore=restore).start()
    job.run_all()
    assert deployed(job).restore_checkpoint_id == SAVEPOINT_ID
    assert deployed(job).abandoned_above is None  # nothing above it ever completed here

    job.lose(COUNTERS[0])  # a failure before the first new checkpoint
    job.advance(500)
    job.run_all(attempt=1)
    assert deployed(job).restore_checkpoint_id == SAVEPOINT_ID
    first = complete_checkpoint(job, attempt=1)
    assert first == SAVEPOINT_ID + 1

    job.lose(COUNTERS[0])  # and one after it
    job.advance(500)
    job.run_all(attempt=2)
    assert (deployed(job).restore_checkpoint_id, deployed(job).abandoned_above) == (first, None)
    assert complete_checkpoint(job, attempt=2) == first + 1


def test_falling_back_to_the_named_savepoint_abandons_only_this_runs_commits(tmp_path):
    restore = SavepointRestoreSettings.for_path(str(savepoint_of(tmp_path)))
    job = harness(tmp_path, checkpoints=(50,), restore=restore).start()
    job.run_all()
    first = complete_checkpoint(job)
    assert first == 51
    damage_newest(tmp_path, first)  # this run's only checkpoint, damaged after it committed
    job.lose(COUNTERS[0])
    job.advance(500)
    job.run_all(attempt=1)
    # back to savepoint 40: this run's commits (51) are abandoned, the earlier run's 50 not
    assert (deployed(job).restore_checkpoint_id, deployed(job).abandoned_above) == (40, 50)


def test_a_savepoint_restored_into_a_folder_with_newer_ids_numbers_above_the_folder(tmp_path):
    restore = SavepointRestoreSettings.for_path(str(savepoint_of(tmp_path)))
    job = harness(tmp_path, checkpoints=(50, 51), restore=restore).start()
    job.run_all()
    assert deployed(job).restore_checkpoint_id == SAVEPOINT_ID
    assert deployed(job).abandoned_above is None  # an earlier run's 50 and 51 stay
    assert complete_checkpoint(job) == 52


def test_a_fresh_start_and_a_restore_of_the_newest_abandon_nothing(tmp_path):
    job = harness(tmp_path).start()
    job.run_all()
    assert deployed(job).abandoned_above is None
    rerun = harness(tmp_path / "rerun", checkpoints=(5, 6)).start()
    rerun.run_all()
    assert (deployed(rerun).restore_checkpoint_id, deployed(rerun).abandoned_above) == (6, None)


def test_the_lineage_is_kept_in_the_folder_and_renewed_when_the_folder_is_new(tmp_path):
    job = harness(tmp_path).start()
    lineage_file = tmp_path / "checkpoints" / "unit-job" / LINEAGE_FILE
    lineage = lineage_file.read_text().strip()
    assert len(lineage) == 16 and task_lineage(job) == lineage
    job.master.close()  # the run ends (its lease goes)

    again = harness(tmp_path).start()  # a rerun into the same folder
    assert task_lineage(again) == lineage
    again.master.close()

    shutil.rmtree(tmp_path / "checkpoints")  # the folder deleted: a new lineage
    fresh = harness(tmp_path).start()
    assert task_lineage(fresh) != lineage
    assert lineage_file.read_text().strip() == task_lineage(fresh)


def damage_newest(tmp_path, n: int) -> None:
    metadata = tmp_path / "checkpoints" / "unit-job" / f"chk-{n}" / "_metadata"
    metadata.write_bytes(metadata.read_bytes()[:-5])


def test_a_fallback_a_sink_cannot_take_back_stops_the_job_naming_the_choices(tmp_path):
    job = harness(tmp_path, checkpoints=(5, 6, 7), sink=Inserts())
    damage_newest(tmp_path, 7)
    with pytest.raises(StateRestoreError) as raised:
        job.start()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("checkpoint 7 is damaged (file://")
    assert "falling back to checkpoint 6 would commit the output committed after it twice" in (
        message
    )
    assert "since 'Sink' (uid sink-" in message and ", Inserts) cannot take it back" in message
    assert message.endswith(
        "restore a savepoint with --from-savepoint PATH, or rerun with "
        "--allow-fallback-duplicates to accept duplicates"
    )
    assert job.master.status.state == "FAILED"
    with pytest.raises(StateRestoreError) as again:  # nothing acts as if it had fallen back
        job.master.restoring.choose()
    assert str(again.value) == message


def test_with_duplicates_allowed_the_fallback_goes_on_with_a_warning(tmp_path, caplog):
    job = harness(tmp_path, checkpoints=(5, 6, 7), sink=Inserts(), allow=True)
    damage_newest(tmp_path, 7)
    with caplog.at_level(logging.WARNING, logger="barrierflow.cluster.jobmaster.job_restore"):
        job.start()
    job.run_all()
    assert (deployed(job).restore_checkpoint_id, deployed(job).abandoned_above) == (6, 6)
    assert "falling back to checkpoint 6 with duplicates allowed" in caplog.text
    assert complete_checkpoint(job) == 8  # above the damaged one too


def test_a_fallback_every_sink_takes_back_goes_on(tmp_path):
    job = harness(tmp_path, checkpoints=(5, 6, 7), sink=FileSink.for_rows(str(tmp_path / "o")))
    damage_newest(tmp_path, 7)
    job.start()
    job.run_all()
    assert (deployed(job).restore_checkpoint_id, deployed(job).abandoned_above) == (6, 6)


def test_a_checkpoint_whose_metadata_is_gone_counts_as_abandoned_too(tmp_path):
    """Its folder looks like one that never completed, but the history says it completed
    (so its output was committed): restoring the older one is a fallback like any other."""
    job = harness(tmp_path, checkpoints=(5, 6, 7), sink=Inserts())
    job.master.history.append(
        CheckpointStats(7, CheckpointStatsStatus.COMPLETED, 7_000, ()), job_id="earlier"
    )
    (tmp_path / "checkpoints" / "unit-job" / "chk-7" / "_metadata").unlink()
    with pytest.raises(StateRestoreError) as raised:
        job.start()
    assert str(raised.value).startswith(
        "a checkpoint above checkpoint 6 completed but its _metadata is gone; falling back to "
        "checkpoint 6 would commit the output committed after it twice, since 'Sink'"
    )
    allowed = harness(tmp_path / "allowed", checkpoints=(5, 6, 7), sink=Inserts(), allow=True)
    allowed.master.history.append(
        CheckpointStats(7, CheckpointStatsStatus.COMPLETED, 7_000, ()), job_id="earlier"
    )
    (tmp_path / "allowed" / "checkpoints" / "unit-job" / "chk-7" / "_metadata").unlink()
    allowed.start()
    allowed.run_all()
    assert (deployed(allowed).restore_checkpoint_id, deployed(allowed).abandoned_above) == (6, 6)
