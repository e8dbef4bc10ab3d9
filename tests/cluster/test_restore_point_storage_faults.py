"""A fault of the checkpoint storage is not damage (issue 21, item 2), event by event: the
chooser marks nothing, lets the error through, and the next attempt reads the same (newest)
checkpoint; a task that cannot read a state file of the point for a storage fault leaves
the decision to the restart strategy, however often; damage still falls back."""

from __future__ import annotations

import pytest

from barrierflow import _fs
from barrierflow.checkpoint.files import file_error, named_file
from barrierflow.cluster.jobmaster.restore_point import FallBack, RestorePointChooser, Retry
from barrierflow.errors import CheckpointStorageUnavailableError, StateRestoreError

JOB = _fs.Location("file:///chk/job")


def folder_of(n: int) -> _fs.Location:
    return JOB.child(f"chk-{n}")


def unavailable(file: _fs.Location) -> CheckpointStorageUnavailableError:
    error = CheckpointStorageUnavailableError(
        f"storage error reading the 'checkpoint-metadata' file {file} (5 tries): "
        "AWS Error SLOW_DOWN during GetObject operation"
    )
    return file_error(error, file)


class FlakyStore:
    """Raises each given error once for its folder, then answers."""

    def __init__(self, **errors: BaseException) -> None:
        self.errors = errors
        self.loaded: list[int] = []

    def __call__(self, folder: _fs.Location) -> dict:
        n = int(folder.name.split("-")[1])
        self.loaded.append(n)
        error = self.errors.pop(f"chk_{n}", None)
        if error is not None:
            raise error
        return {"checkpoint_id": n, "operators": {}}


def test_an_unreadable_newest_checkpoint_is_not_damaged_and_is_read_again_next_time():
    chooser = RestorePointChooser()
    metadata = folder_of(7).child("_metadata")
    store = FlakyStore(chk_7=unavailable(metadata))
    candidates = chooser.candidates([5, 6, 7], folder_of)

    with pytest.raises(CheckpointStorageUnavailableError) as raised:
        chooser.choose(candidates, store)

    assert str(raised.value).startswith("cannot read checkpoint 7 now (storage error reading")
    assert named_file(raised.value) == metadata.uri
    assert store.loaded == [7]  # no fallback to 6
    assert chooser.damaged == {}

    choice = chooser.choose(candidates, store)  # the next attempt: the same, newest one
    assert (choice.point.checkpoint_id, choice.note, store.loaded) == (7, None, [7, 7])


def test_a_task_failing_on_a_storage_fault_is_left_to_the_restart_strategy_however_often():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([6, 7], folder_of), FlakyStore()).point
    state_file = folder_of(7).child("2-0-run.state")
    cause = unavailable(state_file)
    summary = f"CheckpointStorageUnavailableError: {cause} (task 'count (1/2)')"

    for _ in range(3):  # never "damaged", never "failed twice in a row"
        assert chooser.restore_failed(point, cause, summary) == Retry()
    assert chooser.damaged == {}


def test_a_storage_fault_wrapped_in_a_restore_error_is_still_no_damage():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([7], folder_of), FlakyStore()).point
    state_file = folder_of(7).child("2-0-run.state")
    try:
        try:
            raise unavailable(state_file)
        except CheckpointStorageUnavailableError as inner:
            raise StateRestoreError("count (uid) failed while restoring its state") from inner
    except StateRestoreError as wrapped:
        cause = wrapped

    assert chooser.restore_failed(point, cause, "s") == Retry()


def test_a_missing_state_file_is_damage_and_falls_back():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([6, 7], folder_of), FlakyStore()).point
    state_file = folder_of(7).child("2-0-run.state")
    cause = file_error(
        StateRestoreError(f"cannot read the 'subtask-state' file {state_file}: it is missing"),
        state_file,
    )

    decision = chooser.restore_failed(point, cause, "s")

    assert decision == FallBack(f"checkpoint 7 is damaged ({cause})")
