"""`barrierflow checkpoints` against a checkpoint folder written by the tracker and the
history file (no Spark): the tables, `--json`, `--details`, `--last`, and clear errors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from barrierflow import _envelope as state_format
from barrierflow import _fs
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.stats import (
    CheckpointStatsTracker,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.checkpoint.storage import METADATA, METADATA_KIND, FileSystemCheckpointStorage
from barrierflow.cli import main

JOB = "word-count"


@pytest.fixture
def folder(tmp_path):
    """Checkpoints 3 and 4 completed (4 is retained on disk, with 1.5 MiB of state), 5 was
    declined by 'Reduce' (2/2), all written as the JobMaster writes them."""
    storage = FileSystemCheckpointStorage(str(tmp_path), JOB)
    storage.prepare()
    tracker = CheckpointStatsTracker(
        [TaskVertexInfo(0, "Source", 1), TaskVertexInfo(1, "Reduce", 2)]
    )
    history = CheckpointHistoryFile(storage.job_dir)
    for checkpoint_id, trigger in [(3, 1_700_000_000_000), (4, 1_700_000_001_000)]:
        tracker.report_triggered(checkpoint_id, trigger, is_final=checkpoint_id == 4)
        for vertex, index, align in [(0, 0, 0.0), (1, 0, 120.0), (1, 1, 80.0)]:
            tracker.report_acknowledged(
                checkpoint_id,
                SubtaskCheckpointStats(
                    vertex, index, trigger + 300 + index, sync_ms=3.0, async_ms=40.0,
                    alignment_ms=align, start_delay_ms=2.0, state_bytes=524_288,
                ),
            )  # fmt: skip
        path = storage.checkpoint_dir(checkpoint_id).uri
        stats = tracker.report_completed(checkpoint_id, trigger + 312, external_path=path)
        history.append(stats, job_id="run-1")
    _fs.make_dirs(storage.checkpoint_dir(4))
    _fs.write_bytes(
        storage.checkpoint_dir(4).child(METADATA),
        state_format.encode(METADATA_KIND, {"is_final": True, "operators": {"count": {}}}),
    )
    reason = CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION
    tracker.report_triggered(5, 1_700_000_002_000)
    tracker.report_declined(5, SubtaskDecline(1, 1, 1_700_000_002_050, reason, "OSError: full"))
    history.append(tracker.report_failed(5, 1_700_000_002_051, reason), job_id="run-1")
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(main, ["checkpoints", *args], env={"COLUMNS": "250"})


def test_the_tables_show_retained_checkpoints_and_the_history_with_failure_reasons(folder):
    result = run(str(folder), JOB)

    assert result.exit_code == 0, result.output
    out = result.output
    assert "Completed checkpoints on disk" in out
    assert f"{folder}/{JOB}/chk-4" in out
    history = out[out.index("Checkpoint history") :]
    rows = [line for line in history.splitlines() if line.startswith("│")]
    assert [row.split("│")[1].strip() for row in rows] == ["3", "4", "5"]  # newest last
    assert "COMPLETED" in rows[0] and "1.5 MiB" in rows[0] and "312 ms" in rows[0]
    assert "final" in rows[1] and "120 ms" in rows[1]  # alignment max
    assert "FAILED" in rows[2]
    assert "writing a task's state failed: 'Reduce' (2/2) declined: OSError: full" in rows[2]


def test_json_lists_retained_checkpoints_and_the_history_newest_first(folder):
    result = run(str(folder), JOB, "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["job"] == JOB
    assert document["retained"] == [
        {"id": 4, "is_final": True, "operators": 1, "path": f"file://{folder}/{JOB}/chk-4"}
    ]
    assert [(h["id"], h["status"]) for h in document["history"]] == [
        (5, "FAILED"),
        (4, "COMPLETED"),
        (3, "COMPLETED"),
    ]
    completed = document["history"][1]
    assert (completed["end_to_end_duration"], completed["duration"]) == (301, 312)
    assert completed["state_size"] == 3 * 524_288
    assert completed["alignment_duration_max"] == 120.0
    assert document["history"][0]["failure_reason"] == "CHECKPOINT_ASYNC_EXCEPTION"


def test_last_shows_only_the_newest_entries(folder):
    document = json.loads(run(str(folder), JOB, "--json", "--last", "1").output)

    assert [h["id"] for h in document["history"]] == [5]
    assert "last 1 of 3" in run(str(folder), JOB, "--last", "1").output


def test_details_show_one_row_per_subtask(folder):
    result = run(str(folder), JOB, "--details", "4")

    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in row.split("│")[1:-1]] for row in rows]
    assert [c[:3] for c in cells] == [
        ["Source", "1/1", "acknowledged"],
        ["Reduce", "1/2", "acknowledged"],
        ["Reduce", "2/2", "acknowledged"],
    ]
    # after (the trigger), state, checkpointed, sync, async, alignment, start delay, persisted
    assert cells[2][3:11] == [
        "301 ms", "512.0 KiB", "512.0 KiB", "3.0 ms", "40 ms", "80 ms", "2.0 ms", "0 B"
    ]  # fmt: skip


def test_details_of_a_failed_checkpoint_show_who_declined_and_json_is_the_record(folder):
    table = run(str(folder), JOB, "--details", "5").output
    assert "declined (CHECKPOINT_ASYNC_EXCEPTION: OSError: full)" in table
    assert table.count("no answer") == 2

    record = json.loads(run(str(folder), JOB, "--details", "5", "--json").output)
    assert (record["id"], record["job_id"], record["version"]) == (5, "run-1", 1)
    assert record["tasks"]["1"]["subtasks"][1]["status"] == "declined"


def test_details_of_a_checkpoint_not_in_the_history_is_an_error(folder):
    result = run(str(folder), JOB, "--details", "99")

    assert result.exit_code == 1
    assert "checkpoint 99 of 'word-count' is not in its history" in result.output


def test_a_folder_without_the_job_is_an_error_that_names_the_jobs_it_holds(folder):
    result = run(str(folder), "no-such-job")

    assert result.exit_code == 1
    assert f"no job 'no-such-job' in file://{folder}; it holds the jobs: {JOB}" in result.output


def test_a_missing_folder_is_an_error(tmp_path):
    result = run(str(tmp_path / "absent"), JOB)

    assert result.exit_code == 1
    assert "does not exist" in result.output


def test_a_job_folder_without_checkpoints_says_so(tmp_path):
    FileSystemCheckpointStorage(str(tmp_path), JOB).prepare()

    result = run(str(tmp_path), JOB)

    assert result.exit_code == 0
    assert "no checkpoints of 'word-count'" in result.output


# ---- checkpoint read problems: one line naming the file, exit status 1 (issue 9, defect 6) ----


def assert_one_error_line_naming(result, path) -> None:
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert str(path) in result.output


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_a_damaged_metadata_file_is_one_error_line_naming_it(folder, how):
    path = folder / JOB / "chk-4" / METADATA
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:10])
    else:
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0x40]))

    result = run(str(folder), JOB)

    assert_one_error_line_naming(result, path)


def test_an_unreadable_metadata_file_is_one_error_line_naming_it(folder):
    path = folder / JOB / "chk-4" / METADATA
    path.unlink()
    path.mkdir()  # reading it fails with an OSError, as a missing permission would

    result = run(str(folder), JOB)

    assert_one_error_line_naming(result, path)


def test_an_unreadable_history_file_is_one_error_line_naming_it(folder):
    path = folder / JOB / "_checkpoint_history.jsonl"
    path.unlink()
    path.mkdir()

    result = run(str(folder), JOB, "--details", "4")

    assert_one_error_line_naming(result, path)
