"""The persisted checkpoint history: a JSON-lines round trip, the bound on its size, torn
and unknown lines, runs appending to one file, retention leaving it alone, and the job's
savepoints a rerun may restore."""

from __future__ import annotations

import json

import pytest

from barrierflow import _envelope as state_format
from barrierflow import _fs
from barrierflow.checkpoint import retry
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.history import HISTORY_FILE, CheckpointHistoryFile
from barrierflow.checkpoint.retry import Backoff
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsStatus,
    CheckpointStatsTracker,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.checkpoint.storage import METADATA, METADATA_KIND, FileSystemCheckpointStorage
from barrierflow.errors import CheckpointStorageUnavailableError

VERTICES = (TaskVertexInfo(0, "Source", 1), TaskVertexInfo(1, "Sink", 2))


def finished_checkpoints(ids) -> list[CheckpointStats]:
    """Even ids complete (every subtask acknowledges), odd ids are declined by 'Sink' (2/2)."""
    tracker = CheckpointStatsTracker(VERTICES)
    result = []
    for checkpoint_id in ids:
        trigger = checkpoint_id * 1_000
        tracker.report_triggered(checkpoint_id, trigger)
        tracker.report_acknowledged(
            checkpoint_id, SubtaskCheckpointStats(0, 0, trigger + 5, sync_ms=1.5, state_bytes=9)
        )
        if checkpoint_id % 2 == 0:
            for index in (0, 1):
                tracker.report_acknowledged(
                    checkpoint_id,
                    SubtaskCheckpointStats(1, index, trigger + 20, async_ms=4.0, state_bytes=100),
                )
            result.append(tracker.report_completed(checkpoint_id, trigger + 22, external_path="p"))
        else:
            reason = CheckpointFailureReason.CHECKPOINT_DECLINED
            tracker.report_declined(
                checkpoint_id, SubtaskDecline(1, 1, trigger + 7, reason, "busy")
            )
            result.append(tracker.report_failed(checkpoint_id, trigger + 8, reason))
    return result


def lines_of(history: CheckpointHistoryFile) -> list[str]:
    return _fs.read_bytes(history.location).decode().splitlines()


def test_finished_checkpoints_come_back_from_the_file_as_they_went_in(tmp_path):
    job_dir = _fs.location(tmp_path / "job")
    history = CheckpointHistoryFile(job_dir)
    written = finished_checkpoints([1, 2, 3, 4])

    for stats in written:
        history.append(stats, job_id="job-a")

    assert (tmp_path / "job" / HISTORY_FILE).is_file()
    assert history.read() == written
    assert CheckpointHistoryFile(job_dir).read() == written  # what another process reads
    entries = history.read_entries()
    assert [(e.version, e.job_id, e.stats.checkpoint_id, e.stats.status.name) for e in entries] == [
        (1, "job-a", 1, "FAILED"),
        (1, "job-a", 2, "COMPLETED"),
        (1, "job-a", 3, "FAILED"),
        (1, "job-a", 4, "COMPLETED"),
    ]
    assert entries[0].stats.failure_message == "a task declined the checkpoint: 'Sink' (2/2) " + (
        "declined: busy"
    )
    assert history.highest_checkpoint_id() == 4
    assert history.first_unused_id() == 5
    assert len(lines_of(history)) == 4


def test_a_missing_history_reads_as_empty(tmp_path):
    assert CheckpointHistoryFile(_fs.location(tmp_path / "nothing")).read() == []
    assert CheckpointHistoryFile(_fs.location(tmp_path / "nothing")).first_unused_id() == 1


def test_an_unreadable_history_gives_the_first_id_with_a_warning(tmp_path, caplog):
    (tmp_path / HISTORY_FILE).mkdir()  # a folder where the file should be
    assert CheckpointHistoryFile(_fs.location(tmp_path)).first_unused_id() == 1
    assert any(HISTORY_FILE in record.getMessage() for record in caplog.records)


def test_the_file_keeps_the_last_limit_checkpoints_and_never_more_than_twice_as_many_lines(
    tmp_path,
):
    history = CheckpointHistoryFile(_fs.location(tmp_path), limit=5)
    sizes = []
    for stats in finished_checkpoints(range(1, 24)):
        history.append(stats, job_id="j")
        sizes.append(len(lines_of(history)))

    assert max(sizes) == 10
    assert sizes[9:12] == [10, 5, 6]  # the 11th append rewrote the file with the newest 5
    assert [s.checkpoint_id for s in history.read()] == [19, 20, 21, 22, 23]


def test_a_second_run_appends_to_the_same_file_and_counts_its_lines_for_the_bound(tmp_path):
    job_dir = _fs.location(tmp_path)
    first = CheckpointHistoryFile(job_dir, limit=3)
    for stats in finished_checkpoints([1, 2, 3, 4, 5]):
        first.append(stats, job_id="run-1")

    second = CheckpointHistoryFile(job_dir, limit=3)
    for stats in finished_checkpoints([6, 7]):
        second.append(stats, job_id="run-2")

    assert len(lines_of(second)) == 3  # 5 + 1 = 6 lines, then the 7th forced a rewrite
    assert [(e.stats.checkpoint_id, e.job_id) for e in second.read_entries()] == [
        (5, "run-1"),
        (6, "run-2"),
        (7, "run-2"),
    ]


def test_a_line_torn_by_a_crash_is_skipped_and_the_next_record_starts_on_its_own_line(tmp_path):
    job_dir = _fs.location(tmp_path)
    history = CheckpointHistoryFile(job_dir)
    one, two = finished_checkpoints([1, 2])
    history.append(one, job_id="j")
    with open(tmp_path / HISTORY_FILE, "a") as file:
        file.write('{"version": 1, "id": 99, "stat')  # the process died mid-append

    after_crash = CheckpointHistoryFile(job_dir)
    after_crash.append(two, job_id="j")

    assert after_crash.read() == [one, two]
    assert len(lines_of(after_crash)) == 3


def test_records_of_unknown_versions_and_damaged_records_are_skipped(tmp_path):
    history = CheckpointHistoryFile(_fs.location(tmp_path))
    (one,) = finished_checkpoints([2])
    history.append(one, job_id="j")
    with open(tmp_path / HISTORY_FILE, "a") as file:
        file.write(json.dumps({"version": 2, "id": 3, "new": "shape"}) + "\n")
        file.write(json.dumps({"version": 1, "id": 4}) + "\n")
        file.write("[1, 2]\n")

    assert history.read() == [one]
    assert [e.stats.checkpoint_id for e in history.read_entries()] == [2]


def test_retention_of_checkpoint_folders_leaves_the_history_alone(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path), "job")
    storage.prepare()
    for checkpoint_id in (1, 2, 3):
        _fs.make_dirs(storage.checkpoint_dir(checkpoint_id))
        _fs.write_bytes(
            storage.checkpoint_dir(checkpoint_id).child(METADATA),
            state_format.encode(METADATA_KIND, {"is_final": False, "operators": {}}),
        )
    history = CheckpointHistoryFile(storage.job_dir)
    for stats in finished_checkpoints([1, 2, 3]):
        history.append(stats, job_id="j")

    assert storage.retain(1) == [1, 2]
    assert [s.checkpoint_id for s in history.read()] == [1, 2, 3]


def test_completed_savepoints_are_found_by_id_where_their_metadata_is_still_there(tmp_path):
    def snapshot(n: int, status: CheckpointStatsStatus, savepoint: bool) -> CheckpointStats:
        folder = _fs.location(tmp_path / "sp" / f"savepoint-{n}")
        return CheckpointStats(
            n, status, n * 1_000, (), is_savepoint=savepoint, external_path=folder.uri
        )

    done, failed = CheckpointStatsStatus.COMPLETED, CheckpointStatsStatus.FAILED
    history = CheckpointHistoryFile(_fs.location(tmp_path / "job"))
    for stats in [
        snapshot(1, done, savepoint=False),  # a checkpoint: the job folder lists those
        snapshot(2, done, savepoint=True),
        snapshot(3, done, savepoint=True),  # deleted by the user below
        snapshot(4, failed, savepoint=True),
        snapshot(5, done, savepoint=True),
    ]:
        folder = tmp_path / "sp" / f"savepoint-{stats.checkpoint_id}"
        folder.mkdir(parents=True)
        (folder / METADATA).write_bytes(b"x")
        history.append(stats, job_id="j")
    (tmp_path / "sp" / "savepoint-3" / METADATA).unlink()

    found = history.completed_savepoints()
    assert {n: folder.uri for n, folder in found.items()} == {
        2: _fs.location(tmp_path / "sp" / "savepoint-2").uri,
        5: _fs.location(tmp_path / "sp" / "savepoint-5").uri,
    }
    assert list(history.completed_savepoints(since=3)) == [5]
    assert CheckpointHistoryFile(_fs.location(tmp_path / "none")).completed_savepoints() == {}


# ---- storage faults: retried, then never taken for "no savepoint" (issue 21) ---------------------


def savepoint_history(tmp_path) -> tuple[CheckpointHistoryFile, _fs.Location]:
    """A history recording one completed savepoint (id 9) whose folder holds `_metadata`."""
    folder = _fs.location(tmp_path / "sp" / "savepoint-ab12cd-0123456789ab")
    _fs.make_dirs(folder)
    _fs.write_bytes(folder.child(METADATA), state_format.encode(METADATA_KIND, {}))
    history = CheckpointHistoryFile(_fs.location(tmp_path / "job"))
    saved = CheckpointStats(
        9, CheckpointStatsStatus.COMPLETED, 9, (), is_savepoint=True, external_path=folder.uri
    )
    history.append(saved, job_id="j")
    return history, folder


def test_a_transient_fault_reading_the_history_is_retried(tmp_path):
    history, folder = savepoint_history(tmp_path)
    remove = _fs.add_hook(_fs.FaultInjector.parse(f"read:*{HISTORY_FILE}:1:1"))
    try:
        assert history.completed_savepoints() == {9: folder}
    finally:
        remove()


def test_a_savepoint_is_never_skipped_for_a_storage_fault(tmp_path, monkeypatch):
    monkeypatch.setattr(retry, "DEFAULT_BACKOFF", Backoff(attempts=2, first_delay_s=0))
    history, folder = savepoint_history(tmp_path)
    remove = _fs.add_hook(_fs.FaultInjector.parse(f"stat:{folder.uri}/_metadata:1:2"))
    try:
        with pytest.raises(CheckpointStorageUnavailableError, match="savepoint-ab12cd"):
            history.completed_savepoints()
    finally:
        remove()
    assert history.completed_savepoints() == {9: folder}
