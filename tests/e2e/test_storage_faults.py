"""Faults of checkpoint storage are not damage, and never fatal (issue 21, items 2 and 4), on
Spark with an S3-compatible server behind a fault-injecting proxy (tests/support/s3_fault_proxy.py):
a 503 and a 403 reading `_metadata` and state files at a restore, on DELETEs of retention
and on the copies of a FileSink commit (the S3 client retries a 503 itself; a 403, a
permission fluke, reaches barrierflow), and a failed `_metadata` write. Each time the job
goes on, restores the newest checkpoint, and its committed output equals a failure-free
run's: nothing twice, nothing lost."""

from __future__ import annotations

import errno
import logging
import uuid
from collections import Counter

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, _fs
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.connectors.files import FileSink
from barrierflow.errors import JobExecutionError

from .jobs import generated_words, running_count_rows, running_counts, word_of

pytestmark = pytest.mark.spark

RECORDS = 9_000


def word_count(checkpoints: str, out: str, *, rate: float | None, retained: int = 1):
    """A keyed running count of RECORDS words into a FileSink at `out`; parallelism 2,
    checkpoints every 300 ms into `checkpoints`, 3 restarts 100 ms apart."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(checkpoints)
    config.set_max_retained_checkpoints(retained)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    sink = FileSink.for_rows(out)
    running_counts(generated_words(env, RECORDS, rate)).sink_to(sink).uid("sink")
    return env, sink


def locations(s3_faults, name: str) -> tuple[str, str]:
    """(checkpoint storage, FileSink output) in a fresh folder of the bucket, via the proxy."""
    base = f"{name}-{uuid.uuid4().hex[:12]}"
    return s3_faults.uri(f"{base}/chk"), s3_faults.uri(f"{base}/out")


def expected() -> Counter:
    return running_count_rows(word_of(i) for i in range(RECORDS))


def committed(sink: FileSink) -> Counter:
    return Counter(tuple(row) for row in sink.committed_output())


def test_faults_reading_a_checkpoint_at_a_restore_restore_the_newest_checkpoint(
    spark, s3_faults, caplog
):
    checkpoints, out = locations(s3_faults, "restore-fault")
    env, sink = word_count(checkpoints, out, rate=500, retained=3)  # 18 s: cancelled before
    client = env.execute_async("restore-fault")
    assert client.wait_for_completed_checkpoints(3, timeout=120)
    client.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        client.wait(timeout=120)
    storage = FileSystemCheckpointStorage(checkpoints, "restore-fault")
    newest = storage.completed_checkpoint_ids()[-1]
    # The rerun reads the newest _metadata first when it restores: that GET gets a 503 (the
    # S3 client retries it itself), the next a 403 (a permission fluke, which reaches
    # barrierflow); so do the first two GETs of state files, in the tasks that read them.
    metadata = rf"/chk/restore-fault/chk-{newest}/_metadata$"
    state = rf"/chk/restore-fault/chk-{newest}/[^/]*\.state$"
    rules = [
        s3_faults.fail("GET", metadata, nth=1),
        s3_faults.fail("GET", metadata, nth=2, status=403),
        s3_faults.fail("GET", state, nth=1),
        s3_faults.fail("GET", state, nth=2, status=403),
    ]

    env, sink = word_count(checkpoints, out, rate=None, retained=3)
    with caplog.at_level(logging.WARNING):
        rerun = env.execute_async("restore-fault")
        rerun.wait(timeout=240)

    assert [rule.failed for rule in rules] == [1, 1, 1, 1]
    assert rerun.restored_from == newest  # not an older one: a 503 is no damage
    assert not [r for r in caplog.records if "is damaged" in r.getMessage()]
    assert committed(sink) == expected()


def test_a_failed_delete_of_retention_is_retried_later_and_the_job_finishes(spark, s3_faults):
    checkpoints, out = locations(s3_faults, "retain-fault")
    # Retention deletes a folder's objects in one POST ?delete, then the folder's own key.
    # The S3 client retries a 503 itself; a 403 (a permission fluke) reaches barrierflow.
    slow = s3_faults.fail("DELETE", r"/chk/retain-fault/chk-\d+/$", nth=1)
    denied = s3_faults.fail("DELETE", r"/chk/retain-fault/chk-\d+/$", nth=2, status=403)
    env, sink = word_count(checkpoints, out, rate=1500)

    result = env.execute_async("retain-fault").wait(timeout=240)

    assert (slow.failed, denied.failed) == (1, 1)
    assert result.restarts == 0  # never fatal, not even a failover
    assert committed(sink) == expected()
    storage = FileSystemCheckpointStorage(checkpoints, "retain-fault")
    assert len(storage.completed_checkpoint_ids()) == 1  # the leftovers went later


def test_a_failed_file_sink_commit_commits_nothing_twice(spark, s3_faults):
    checkpoints, out = locations(s3_faults, "commit-fault")
    # On S3 a commit copies the staged file to its final name (a PUT with a copy source),
    # then deletes the staged one. Subtask 0's 1st copy gets a 503 (the S3 client retries
    # it), its 2nd a 403: the commit fails in barrierflow's hands, the attempt restarts and
    # the restore commits the file again.
    slow = s3_faults.fail("PUT", r"/out/part-sink-0-[^/]*$", nth=1)
    denied = s3_faults.fail("PUT", r"/out/part-sink-0-[^/]*$", nth=2, status=403)
    env, sink = word_count(checkpoints, out, rate=1500)

    result = env.execute_async("commit-fault").wait(timeout=240)

    assert (slow.failed, denied.failed) == (1, 1)
    assert result.restarts >= 1
    assert committed(sink) == expected()
    assert not _fs.list_files_recursive(_fs.location(out).child(".staging"))


def test_a_failed_metadata_write_aborts_that_checkpoint_and_the_job_goes_on(spark, tmp_path):
    """Item 4: writing `_metadata` fails once (the JobMaster runs in this process): that
    checkpoint is aborted as the failure tolerance says, never a crash of the job."""
    failed: list[str] = []

    def fail_third_metadata(kind: str, loc: _fs.Location) -> None:
        if kind == "write" and loc.name == "_metadata":
            failed.append(loc.uri)
            if len(failed) == 3:
                raise OSError(errno.EIO, f"injected: cannot write {loc}")

    env, sink = word_count(str(tmp_path / "chk"), str(tmp_path / "out"), rate=3000)
    env.get_checkpoint_config().set_tolerable_checkpoint_failure_number(1)
    remove = _fs.add_hook(fail_third_metadata)
    try:
        result = env.execute_async("metadata-write").wait(timeout=240)
    finally:
        remove()

    assert len(failed) > 3
    assert result.restarts == 0  # tolerated: the job went on without a failover
    assert committed(sink) == expected()
    third = int(failed[2].rsplit("/chk-", 1)[1].split("/")[0])
    assert third not in [s.checkpoint_id for s in result.checkpoints]
