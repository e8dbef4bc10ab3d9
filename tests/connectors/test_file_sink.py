"""FileSink's two-phase commit: only committed files are visible, each exactly once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import SinkError, StateRestoreError


def context(subtask: int = 0, deployment: str = "run1-0", parallelism: int = 2, uid: str = "sink"):
    return SinkContext(uid, subtask, parallelism, 0, deployment)


def new_writer(out: Path, restore=(), **kwargs):
    """A writer as the sink operator makes one: created, then restored once."""
    writer = FileSink.for_rows(str(out)).create_writer(context(**kwargs))
    writer.restore(list(restore))
    return writer


def committed(out: Path) -> list:
    """Every committed row, file by file in name order, as a reader that skips hidden names sees."""
    rows = []
    for part in sorted(out.glob("part-*")):
        rows.extend(json.loads(line) for line in part.read_text().splitlines())
    return rows


def staged_files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in (out / ".staging").rglob("*") if p.is_file())


@pytest.fixture
def out(tmp_path):
    folder = tmp_path / "out"
    FileSink.for_rows(str(folder)).prepare()
    return folder


def test_records_become_json_lines_with_tuples_as_arrays(out):
    writer = new_writer(out)
    writer.write_batch([("a", 1), ["b", 2.5], {"k": [True, None]}, "text", 7, "ünï"])
    writer.pre_commit(1)
    writer.commit(1)
    assert committed(out) == [["a", 1], ["b", 2.5], {"k": [True, None]}, "text", 7, "ünï"]


def test_nothing_is_visible_before_the_commit(out):
    writer = new_writer(out)
    writer.write_batch([1, 2])
    assert list(out.glob("part-*")) == []
    writer.pre_commit(1)
    assert list(out.glob("part-*")) == []
    assert committed(out) == []
    assert FileSource.for_json_lines(str(out)).create_splits() == []  # staging is hidden


def test_a_commit_makes_every_pending_file_up_to_its_checkpoint_visible_in_order(out):
    writer = new_writer(out)
    writer.write_batch([1, 2])
    writer.pre_commit(1)
    writer.write_batch([3])
    writer.write_batch([4])
    writer.pre_commit(2)
    writer.write_batch([5])
    writer.pre_commit(3)

    writer.commit(2)
    assert committed(out) == [1, 2, 3, 4]
    assert [checkpoint_id for checkpoint_id, _ in writer.snapshot_state()["pending"]] == [3]
    writer.commit(3)
    assert committed(out) == [1, 2, 3, 4, 5]
    assert writer.snapshot_state()["pending"] == []


def test_committing_twice_is_harmless(out):
    writer = new_writer(out)
    writer.write_batch([1])
    writer.pre_commit(1)
    state = writer.snapshot_state()
    writer.commit(1)
    writer.commit(1)
    # The restored checkpoint had it pending: it is committed again, harmlessly.
    new_writer(out, deployment="run1-1", restore=[state])
    assert committed(out) == [1]


def test_an_empty_transaction_writes_no_file(out):
    writer = new_writer(out)
    writer.pre_commit(1)
    writer.write_batch([])
    writer.pre_commit(2)
    assert [handle["files"] for _, handle in writer.snapshot_state()["pending"]] == [[], []]
    writer.commit(2)
    assert list(out.glob("part-*")) == []
    assert staged_files(out) == []


def test_file_names_carry_uid_subtask_and_deployment(out):
    writer = new_writer(out, subtask=1, deployment="abc-3", uid="my sink/1")
    writer.write_batch(["x"])
    writer.pre_commit(1)
    writer.commit(1)
    (name,) = [p.name for p in out.glob("part-*")]
    assert name.startswith("part-my_sink_1_") and name.endswith("-1-abc-3-00000000.jsonl")


def test_a_restore_commits_the_pending_files_of_the_restored_checkpoint(out):
    crashed = new_writer(out, deployment="run1-0")
    crashed.write_batch([1, 2])
    crashed.pre_commit(1)
    state = crashed.snapshot_state()
    crashed.write_batch([3])  # in progress when the process died: never committed
    crashed.pre_commit(2)  # pending for a checkpoint that never completed

    new_writer(out, deployment="run1-1", restore=[state])

    assert committed(out) == [1, 2]
    assert staged_files(out) == []


def test_a_restore_leaves_other_subtasks_and_the_current_deployment_alone(out):
    for subtask, deployment in [(0, "run1-0"), (1, "run1-0")]:
        new_writer(out, subtask=subtask, deployment=deployment).write_batch([f"{subtask} old"])
    current = new_writer(out, subtask=0, deployment="run1-1")  # clears (0, run1-0)
    current.write_batch(["0 current"])
    assert len(staged_files(out)) == 2

    new_writer(out, subtask=0, deployment="run1-1")  # the same deployment restores again

    assert [name.split("/")[2:4] for name in staged_files(out)] == [
        ["0", "run1-1"],
        ["1", "run1-0"],
    ]


def test_a_restore_leaves_other_operators_alone(out):
    other = new_writer(out, uid="other", deployment="run1-0")
    other.write_batch(["theirs"])
    new_writer(out, uid="sink", deployment="run1-1")
    assert staged_files(out) == [f".staging/other/0/run1-0/part-other-0-run1-0-{0:08d}.jsonl"]


def test_after_a_rescale_a_subtask_commits_and_clears_the_old_subtasks_it_took_over(out):
    # Old parallelism 4; new parallelism 2: new subtask 0 gets the state of old 0 and 2.
    old = {i: new_writer(out, subtask=i, deployment="run1-0", parallelism=4) for i in range(4)}
    states = {}
    for i, writer in old.items():
        writer.write_batch([f"committed by {i}"])
        writer.pre_commit(5)
        states[i] = writer.snapshot_state()
        writer.write_batch([f"lost by {i}"])

    new_writer(out, subtask=0, deployment="run1-1", parallelism=2, restore=[states[0], states[2]])

    assert sorted(committed(out)) == ["committed by 0", "committed by 2"]
    assert [name.split("/")[2] for name in staged_files(out)] == ["1", "1", "3", "3"]


def test_abort_deletes_the_in_progress_file_but_keeps_pending_ones(out):
    writer = new_writer(out)
    writer.write_batch([1])
    writer.pre_commit(1)
    writer.write_batch([2])
    assert len(staged_files(out)) == 2
    writer.abort()
    assert len(staged_files(out)) == 1
    writer.commit(1)
    assert committed(out) == [1]


def test_a_record_that_is_not_json_is_a_sink_error_naming_its_type(out):
    writer = new_writer(out)
    with pytest.raises(SinkError, match="record of type bytes"):
        writer.write_batch([1, b"raw"])
    with pytest.raises(SinkError, match=r"record of type tuple.*set"):
        writer.write_batch([("ok", {1, 2})])
    assert staged_files(out) == []  # nothing of a failed batch was written


def test_an_unwritable_output_folder_is_a_sink_error_naming_it(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(SinkError, match=r"blocker/out is not writable"):
        FileSink.for_rows(str(blocker / "out")).prepare()


def test_prepare_creates_the_output_folder_and_leaves_no_probe(tmp_path):
    FileSink.for_rows(str(tmp_path / "a" / "b")).prepare()
    assert (tmp_path / "a" / "b").is_dir()
    assert [p for p in (tmp_path / "a" / "b").rglob("*") if p.is_file()] == []


def test_a_pending_file_missing_from_both_places_is_a_sink_error(out):
    writer = new_writer(out)
    writer.write_batch([1])
    writer.pre_commit(1)
    for name in staged_files(out):
        (out / name).unlink()
    with pytest.raises(SinkError, match=r"staged file .* is missing"):
        writer.commit(1)


def test_a_state_of_an_unknown_version_is_refused(out):
    writer = FileSink.for_rows(str(out)).create_writer(context())
    with pytest.raises(StateRestoreError, match="unknown FileSink state"):
        writer.restore([{"version": 99, "pending": []}])


def test_closing_with_uncommitted_records_is_a_sink_error(out):
    writer = new_writer(out)
    writer.write_batch([1])
    with pytest.raises(SinkError, match=r"1 transaction.*never committed"):
        writer.close()
    assert staged_files(out) == []


def test_closing_after_everything_committed_is_quiet(out):
    writer = new_writer(out)
    writer.write_batch([1])
    writer.pre_commit(1)
    writer.commit(1)
    writer.close()
    assert committed(out) == [1]


def test_the_committed_output_reads_back_through_the_file_source(out):
    writer = new_writer(out)
    writer.write_batch([("a", 1), ("b", 2)])
    writer.pre_commit(1)
    writer.write_batch([("c", 3)])
    writer.pre_commit(2)
    writer.commit(2)
    writer.write_batch([("uncommitted", 4)])

    source = FileSource.for_json_lines(str(out))
    reader = source.create_reader(source.create_splits())
    rows = []
    while (batch := reader.poll_batch(100)) is not None:
        rows.extend(batch)
    assert rows == [["a", 1], ["b", 2], ["c", 3]]
