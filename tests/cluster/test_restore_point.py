"""Choosing the restore point, event by event: the newest intact candidate, falling back past
damaged ones with one line naming the file, never silently empty, a damaged savepoint the
user named fails at once, a restore failure repeated gives up (issue 11, "Bad checkpoints")."""

from __future__ import annotations

import pytest

from barrierflow import _fs
from barrierflow.checkpoint.files import file_error
from barrierflow.cluster.jobmaster.restore_point import (
    Candidate,
    FallBack,
    GiveUp,
    RestoreMode,
    RestorePointChooser,
    Retry,
    SavepointRestoreSettings,
)
from barrierflow.errors import (
    CheckpointStorageError,
    ConfigurationError,
    SourceError,
    StateRestoreError,
)

JOB = _fs.Location("file:///chk/job")
SAVEPOINT = Candidate(_fs.Location("file:///sp/savepoint-ab12cd-0123456789ab"))


def folder_of(n: int) -> _fs.Location:
    return JOB.child(f"chk-{n}")


def damaged(n: int) -> StateRestoreError:
    where = folder_of(n).child("_metadata")
    return file_error(StateRestoreError(f"{where}: damaged: checksum 0x1, expected 0x2"), where)


class Store:
    """An in-memory loader: metadata per folder, or the error reading it raises."""

    def __init__(self, **errors: BaseException) -> None:
        self.errors = errors
        self.loaded: list[str] = []

    def __call__(self, folder: _fs.Location) -> dict:
        self.loaded.append(folder.uri)
        name = folder.uri.rsplit("/", 1)[-1].replace("-", "_")
        if name in self.errors:
            raise self.errors[name]
        n = int(name[4:]) if name.startswith("chk_") else 42
        return {"checkpoint_id": n, "operators": {}}


def test_candidates_are_the_checkpoints_newest_first_then_the_savepoint():
    chooser = RestorePointChooser(SAVEPOINT)
    found = chooser.candidates([4, 6, 5], folder_of)
    assert [c.describe() for c in found] == [
        "checkpoint 6",
        "checkpoint 5",
        "checkpoint 4",
        f"savepoint {SAVEPOINT.folder}",
    ]


def test_the_newest_intact_checkpoint_is_chosen_without_a_note():
    chooser = RestorePointChooser()
    choice = chooser.choose(chooser.candidates([6, 7], folder_of), Store())
    assert (choice.point.checkpoint_id, choice.note) == (7, None)


def test_no_candidate_at_all_starts_empty():
    chooser = RestorePointChooser()
    assert chooser.choose([], Store()).point is None


def test_a_damaged_metadata_falls_back_with_one_line_naming_the_file():
    chooser = RestorePointChooser()
    store = Store(chk_7=damaged(7))
    choice = chooser.choose(chooser.candidates([5, 6, 7], folder_of), store)

    assert choice.point.checkpoint_id == 6
    assert choice.note == (
        f"checkpoint 7 is damaged ({folder_of(7)}/_metadata: damaged: checksum 0x1, "
        "expected 0x2); restoring from checkpoint 6 instead"
    )
    # The damaged one is never read again; the note is said once.
    store.loaded.clear()
    again = chooser.choose(chooser.candidates([5, 6, 7], folder_of), store)
    assert (again.point.checkpoint_id, again.note, store.loaded) == (6, None, [folder_of(6).uri])


def test_every_checkpoint_damaged_is_an_error_naming_each_never_an_empty_start():
    chooser = RestorePointChooser()
    missing = file_error(CheckpointStorageError("cannot read x/chk-6/a.state"), "x/chk-6/a.state")
    store = Store(chk_7=damaged(7), chk_6=missing)
    with pytest.raises(StateRestoreError) as raised:
        chooser.choose(chooser.candidates([6, 7], folder_of), store)
    message = str(raised.value)
    assert "checkpoint 7 is damaged" in message and "chk-7/_metadata" in message
    assert "checkpoint 6 is damaged (cannot read x/chk-6/a.state)" in message
    assert "no intact checkpoint is left to restore from (start from a savepoint" in message
    with pytest.raises(StateRestoreError, match="no intact checkpoint"):
        chooser.choose(chooser.candidates([6, 7], folder_of), store)


def test_a_damaged_savepoint_the_user_named_fails_at_once_naming_the_file():
    chooser = RestorePointChooser(SAVEPOINT)
    broken = file_error(CheckpointStorageError("cannot read sp/_metadata"), "sp/_metadata")
    with pytest.raises(StateRestoreError, match=r"^cannot restore from savepoint .*sp/_metadata"):
        chooser.choose(chooser.candidates([], folder_of), Store(**{SAVEPOINT_NAME: broken}))


SAVEPOINT_NAME = "savepoint_ab12cd_0123456789ab"


def test_after_a_savepoint_the_run_s_own_checkpoint_comes_first():
    chooser = RestorePointChooser(SAVEPOINT)
    assert chooser.choose(chooser.candidates([], folder_of), Store()).point.candidate == SAVEPOINT
    later = chooser.choose(chooser.candidates([9], folder_of), Store())
    assert later.point.checkpoint_id == 9


def test_a_task_reading_a_damaged_file_of_the_point_falls_back_to_the_previous_one():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([6, 7], folder_of), Store()).point
    state_file = folder_of(7).child("2-0-run.state").uri
    cause = file_error(StateRestoreError(f"{state_file}: damaged: checksum"), state_file)

    decision = chooser.restore_failed(point, cause, f"StateRestoreError: {cause} (task 'x')")

    assert decision == FallBack(f"checkpoint 7 is damaged ({state_file}: damaged: checksum)")
    choice = chooser.choose(chooser.candidates([6, 7], folder_of), Store())
    assert choice.point.checkpoint_id == 6
    assert choice.note == (
        f"checkpoint 7 is damaged ({state_file}: damaged: checksum); "
        "restoring from checkpoint 6 instead"
    )


def test_a_task_reading_a_damaged_file_of_a_named_savepoint_gives_up_naming_it():
    chooser = RestorePointChooser(SAVEPOINT)
    point = chooser.choose(chooser.candidates([], folder_of), Store()).point
    state_file = SAVEPOINT.folder.child("2-0-run.state").uri
    cause = file_error(StateRestoreError(f"{state_file} is truncated"), state_file)

    decision = chooser.restore_failed(point, cause, "StateRestoreError: ...")

    assert isinstance(decision, GiveUp)
    assert str(decision.error) == f"cannot restore from savepoint {SAVEPOINT.folder}: {cause}"


def test_a_restore_failure_that_is_no_damaged_file_retries_once_then_gives_up():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([7], folder_of), Store()).point
    cause = StateRestoreError("cannot unpickle the value of state 'count'")
    summary = f"StateRestoreError: {cause} (task 'x')"

    assert chooser.restore_failed(point, cause, summary) == Retry()
    decision = chooser.restore_failed(point, cause, summary)

    assert isinstance(decision, GiveUp)
    assert str(decision.error) == f"restoring checkpoint 7 failed twice in a row: {summary}"
    assert decision.error.__cause__ is cause


def test_a_failure_not_about_state_is_left_to_the_restart_strategy_however_often():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([7], folder_of), Store()).point
    cause = SourceError("the broker is down")
    for _ in range(3):
        assert chooser.restore_failed(point, cause, "SourceError: the broker is down") == Retry()


def test_a_damaged_file_outside_the_point_is_no_reason_to_fall_back():
    chooser = RestorePointChooser()
    point = chooser.choose(chooser.candidates([7], folder_of), Store()).point
    elsewhere = folder_of(70).child("a.state").uri
    cause = file_error(StateRestoreError(f"{elsewhere}: damaged"), elsewhere)
    assert chooser.restore_failed(point, cause, "s") == Retry()


def test_restore_settings_take_flink_s_mode_names_and_refuse_others():
    settings = SavepointRestoreSettings.for_path("/sp", restore_mode="claim")
    assert (settings.restore_mode, settings.allow_non_restored_state) == (RestoreMode.CLAIM, False)
    assert SavepointRestoreSettings.for_path("/sp").restore_mode is RestoreMode.NO_CLAIM
    with pytest.raises(ConfigurationError, match="unknown restore mode 'legacy'"):
        SavepointRestoreSettings.for_path("/sp", restore_mode="legacy")
