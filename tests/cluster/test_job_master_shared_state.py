"""The JobMaster and the shared files of incremental checkpoints, checked on disk: retention
deletes exactly the files no retained checkpoint references, an aborted checkpoint's new
files go, a driver restart rebuilds the registry and sweeps what nobody references, claim
and no-claim restores, and the two sizes in the REST body, `/metrics` and `barrierflow
checkpoints --json`. Fake tasks (acknowledgements carrying shared files), ManualClock."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner
from job_master_builder import INTERVAL_MS, PARTITIONS, SOURCES, JobHarness

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.checkpoint.metadata import build_metadata, shared_files
from barrierflow.checkpoint.storage import load_metadata
from barrierflow.cli import main
from barrierflow.cluster.jobmaster.restore_point import SavepointRestoreSettings
from barrierflow.cluster.metrics.prometheus import _checkpoint_families
from barrierflow.cluster.rest.bodies import checkpoints_json
from barrierflow.runtime import task_messages as msg

STATE_FILE_BYTES = 100
SIZE = 10
"""Every shared file's size."""


def harness(tmp_path: Path, retained: int = 2, restore=None) -> JobHarness:
    job = JobHarness(tmp_path, RestartStrategies.fixed_delay_restart(3, 500))
    settings = job.master.settings
    settings.retained_checkpoints = retained
    settings.coordinator = replace(settings.coordinator, tolerable_failures=10)
    if restore is not None:  # read when the JobMaster is made
        settings.savepoint_restore = restore
        job.master.__init__(
            job.master.graph,
            settings,
            clock=job.clock,
            connect_runner=job._connect_runner,
            start_rpc=job._start_rpc,
        )
    return job.start()


def job_dir(job: JobHarness) -> Path:
    return Path(job.master.storage.job_dir.path)


def upload(job: JobHarness, name: str) -> None:
    """What a task's incremental write does: a new file in the job's shared/ folder."""
    target = job_dir(job) / name
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"x" * SIZE)


def ack(job: JobHarness, partition: int, checkpoint_id: int, files: list[tuple[str, bool]]):
    """The acknowledgement of `partition`, its new files uploaded first (as a task does)."""
    for name, new in files:
        if new:
            upload(job, name)
    uploaded = STATE_FILE_BYTES + SIZE * sum(new for _, new in files)
    return msg.AcknowledgeCheckpoint(
        0,
        partition,
        checkpoint_id,
        None,
        state_bytes=STATE_FILE_BYTES + SIZE * len(files),
        shared_files=tuple((name, SIZE, new) for name, new in files),
        checkpointed_bytes=uploaded,
    )


def checkpoint(job: JobHarness, references: dict[int, list[tuple[str, bool]]]) -> int:
    """Trigger the next checkpoint; every task acknowledges with its shared files."""
    job.advance(INTERVAL_MS)
    checkpoint_id = job.trigger_ids(SOURCES[0])[-1]
    for partition in PARTITIONS:
        job.send(partition, ack(job, partition, checkpoint_id, references.get(partition, [])))
    assert checkpoint_id in job.master.status.completed_checkpoints
    return checkpoint_id


def on_disk(job: JobHarness) -> tuple[set[str], set[str]]:
    """(files in shared/, files the checkpoints on disk reference), both as `shared/<n>`."""
    folder = job_dir(job)
    present = {f"shared/{p.name}" for p in (folder / "shared").glob("*")}
    referenced = set()
    for chk in folder.glob("chk-*"):
        if (chk / "_metadata").exists():
            metadata = load_metadata(job.master.storage.job_dir.child(chk.name))
            referenced |= {name for name, _ in shared_files(metadata)}
    return present, referenced


def assert_consistent(job: JobHarness) -> set[str]:
    present, referenced = on_disk(job)
    assert present == referenced, (
        f"missing {sorted(referenced - present)}, unreferenced {sorted(present - referenced)}"
    )
    return present


def incremental(n: int) -> dict[int, list[tuple[str, bool]]]:
    """Checkpoint n of a job whose task 2 keeps one base file from checkpoint 1 on, and
    every task uploads one new file per checkpoint, reusing the previous one once."""
    refs: dict[int, list[tuple[str, bool]]] = {}
    for partition in PARTITIONS:
        files = [(f"shared/p{partition}-c{n}.sst", True)]
        if n > 1:
            files.append((f"shared/p{partition}-c{n - 1}.sst", False))
        refs[partition] = files
    refs[2].append(("shared/base.sst", n == 1))
    return refs


def test_retention_deletes_exactly_the_files_no_retained_checkpoint_references(tmp_path):
    job = harness(tmp_path, retained=2)
    job.run_all()
    for n in range(1, 6):
        assert checkpoint(job, incremental(n)) == n
        present = assert_consistent(job)
        assert "shared/base.sst" in present  # every checkpoint references it
    assert sorted(p.name for p in job_dir(job).glob("chk-*")) == ["chk-4", "chk-5"]
    assert "shared/p0-c3.sst" in present  # 4 still references 3's file
    assert "shared/p0-c2.sst" not in present

    metadata = job.master.storage.load_metadata(5)
    assert ["shared/base.sst", SIZE] in metadata["shared_files"]


def test_a_file_shared_by_three_checkpoints_goes_with_the_last_of_them(tmp_path):
    job = harness(tmp_path, retained=2)
    job.run_all()
    checkpoint(job, {2: [("shared/common.sst", True)]})
    checkpoint(job, {2: [("shared/common.sst", False)]})
    checkpoint(job, {2: [("shared/common.sst", False)]})
    checkpoint(job, {2: [("shared/other.sst", True)]})  # 2 goes, 3 keeps common
    assert assert_consistent(job) == {"shared/common.sst", "shared/other.sst"}
    checkpoint(job, {})  # 3 goes: nobody needs common any more
    assert assert_consistent(job) == {"shared/other.sst"}


def test_an_aborted_checkpoint_deletes_its_new_files_but_not_reused_ones(tmp_path):
    job = harness(tmp_path, retained=1)
    job.run_all()
    checkpoint(job, {2: [("shared/base.sst", True)]})
    job.advance(INTERVAL_MS)
    checkpoint_id = job.trigger_ids(SOURCES[0])[-1]
    job.send(2, ack(job, 2, checkpoint_id, [("shared/base.sst", False), ("shared/new.sst", True)]))
    job.send(0, msg.DeclineCheckpoint(0, 0, checkpoint_id, "CHECKPOINT_DECLINED", "no"))
    assert assert_consistent(job) == {"shared/base.sst"}
    # a late acknowledgement of the aborted checkpoint: its upload goes too
    job.send(3, ack(job, 3, checkpoint_id, [("shared/late.sst", True)]))
    assert assert_consistent(job) == {"shared/base.sst"}
    assert job.master.status.state == "RUNNING"


def test_a_driver_restart_rebuilds_the_registry_and_sweeps_unreferenced_files(tmp_path):
    job = harness(tmp_path, retained=2)
    job.run_all()
    for n in range(1, 4):
        checkpoint(job, incremental(n))
    upload(job, "shared/left-by-a-killed-task.sst")  # uploaded, never acknowledged
    job.master.close()  # the driver goes (the lease with it)

    again = harness(tmp_path, retained=2)
    assert again.master.storage.shared.checkpoint_ids == (2, 3)
    assert "shared/left-by-a-killed-task.sst" not in assert_consistent(again)
    again.run_all()
    for n in range(4, 7):
        checkpoint(again, incremental(n))
        present = assert_consistent(again)
    assert "shared/base.sst" in present
    assert "shared/p0-c3.sst" not in present  # released by the rebuilt registry
    assert sorted(p.name for p in job_dir(again).glob("chk-*")) == ["chk-5", "chk-6"]


def donor_checkpoint(tmp_path: Path) -> Path:
    """An incremental checkpoint of another job folder, with its shared file."""
    donor = JobHarness(tmp_path / "donor", RestartStrategies.no_restart())
    storage = donor.master.storage
    storage.prepare()
    metadata = build_metadata(
        donor.master.graph, 4, 1, False, {}, shared_files=[("shared/donor.sst", SIZE)]
    )
    storage.write_metadata(4, metadata)
    folder = Path(storage.job_dir.path)
    (folder / "shared").mkdir()
    (folder / "shared" / "donor.sst").write_bytes(b"x" * SIZE)
    return folder


def test_no_claim_never_deletes_the_restored_checkpoints_files(tmp_path):
    donor = donor_checkpoint(tmp_path)
    restore = SavepointRestoreSettings.for_path(str(donor / "chk-4"))
    job = harness(tmp_path, retained=1, restore=restore)
    job.run_all()
    for n in range(1, 4):
        checkpoint(job, incremental(n))
    assert (donor / "chk-4" / "_metadata").exists()
    assert (donor / "shared" / "donor.sst").exists()


def test_claim_deletes_the_restored_checkpoint_and_its_files_once_subsumed(tmp_path):
    donor = donor_checkpoint(tmp_path)
    restore = SavepointRestoreSettings.for_path(str(donor / "chk-4"), restore_mode="claim")
    job = harness(tmp_path, retained=1, restore=restore)
    job.run_all()
    assert (donor / "shared" / "donor.sst").exists()
    checkpoint(job, incremental(1))
    assert not (donor / "chk-4").exists()
    assert not (donor / "shared" / "donor.sst").exists()
    assert_consistent(job)


def test_no_claim_of_the_jobs_own_checkpoint_keeps_its_files(tmp_path):
    job = harness(tmp_path, retained=1)
    job.run_all()
    checkpoint(job, {2: [("shared/kept.sst", True)]})
    job.master.close()
    own = job_dir(job) / "chk-1"
    again = harness(tmp_path, retained=1, restore=SavepointRestoreSettings.for_path(str(own)))
    again.run_all()
    for _ in range(3):
        checkpoint(again, {2: [(f"shared/{again.clock.epoch_millis()}.sst", True)]})
    assert (own / "_metadata").exists()
    assert (job_dir(job) / "shared" / "kept.sst").exists()


def test_state_size_and_checkpointed_size_in_the_rest_body_metrics_and_cli(tmp_path):
    job = harness(tmp_path, retained=2)
    job.run_all()
    checkpoint(job, incremental(1))
    checkpoint(job, incremental(2))
    # checkpoint 2: 4 state files, 4 new files and 4 + 1 reused ones
    state_size = 4 * STATE_FILE_BYTES + 9 * SIZE
    checkpointed_size = 4 * STATE_FILE_BYTES + 4 * SIZE

    body = checkpoints_json(job.master.stats_tracker.snapshot())
    latest = body["latest"]["completed"]
    assert (latest["state_size"], latest["checkpointed_size"]) == (state_size, checkpointed_size)
    assert body["summary"]["checkpointed_size"]["max"] == 4 * STATE_FILE_BYTES + 5 * SIZE

    view = SimpleNamespace(name="unit-job", checkpoints=job.master.stats_tracker.snapshot())
    gauges = {f.name: f.samples[0].value for f in _checkpoint_families(view)}
    assert gauges["barrierflow_checkpoint_last_size_bytes"] == state_size
    assert gauges["barrierflow_checkpoint_last_checkpointed_size_bytes"] == checkpointed_size

    result = CliRunner().invoke(
        main, ["checkpoints", str(tmp_path / "checkpoints"), "unit-job", "--json"]
    )
    assert result.exit_code == 0, result.output
    history = {h["id"]: h for h in json.loads(result.output)["history"]}
    assert (history[2]["state_size"], history[2]["checkpointed_size"]) == (
        state_size,
        checkpointed_size,
    )
    assert history[1]["checkpointed_size"] == history[1]["state_size"]  # all new


def test_the_sizes_are_equal_without_shared_files(tmp_path):
    job = harness(tmp_path)
    job.run_all()
    checkpoint(job, {})
    stats = job.master.checkpoint_stats[-1]
    assert stats.state_bytes == stats.checkpointed_bytes == 4 * STATE_FILE_BYTES
    assert not (job_dir(job) / "shared").exists()
    assert "shared_files" not in job.master.storage.load_metadata(1)


def test_only_files_of_shared_are_ever_deleted_as_shared_files(tmp_path):
    job = harness(tmp_path)
    outside = job_dir(job) / "keep-me"
    outside.write_bytes(b"x")
    job.master.storage.delete_shared(["keep-me", "shared/../keep-me", "chk-1/x"])
    assert outside.exists()


def test_the_jobs_end_sweeps_uploads_of_checkpoints_that_never_completed(tmp_path):
    job = harness(tmp_path, retained=2)
    job.run_all()
    checkpoint(job, incremental(1))
    job.advance(INTERVAL_MS)  # checkpoint 2: a task uploads, then its process is killed
    upload(job, "shared/of-a-killed-task.sst")
    job.master.request_cancel()
    job.master.drain()
    assert job.master.status.state == "CANCELED"
    assert "shared/of-a-killed-task.sst" not in assert_consistent(job)
    assert "shared/base.sst" in assert_consistent(job)


def test_a_checkpoint_missing_a_shared_file_is_found_by_the_driver_and_skipped(tmp_path):
    job = JobHarness(tmp_path, RestartStrategies.fixed_delay_restart(3, 500))
    storage = job.master.storage
    storage.prepare()
    for n, name in [(5, "shared/five.sst"), (6, "shared/six.sst")]:
        files = [(name, SIZE)]
        storage.write_metadata(
            n, build_metadata(job.master.graph, n, n, False, {}, shared_files=files)
        )
    upload(job, "shared/five.sst")  # six's is gone

    job.start()
    job.register_all()

    (deploy,) = job.tasks[PARTITIONS[-1]].sent_of(msg.DeployTask)
    assert deploy.restore_checkpoint_id == 5
    assert "six.sst" in job.master.restoring.chooser.damaged[storage.checkpoint_dir(6).uri]
