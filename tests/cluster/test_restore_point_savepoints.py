"""The job's own savepoints among the restore candidates (issue 11): a rerun after a stop with
savepoint takes the newest snapshot of the job by checkpoint id, the savepoint or a retained
checkpoint, and a damaged one falls back to the next older like a damaged checkpoint."""

from __future__ import annotations

from barrierflow import _fs
from barrierflow.checkpoint.files import file_error
from barrierflow.cluster.jobmaster.restore_point import Candidate, RestorePoint, RestorePointChooser
from barrierflow.errors import StateRestoreError

JOB = _fs.Location("file:///chk/job")
SAVEPOINTS = {
    9: _fs.Location("file:///sp/savepoint-ab12cd-000000000009"),
    4: _fs.Location("file:///sp/savepoint-ab12cd-000000000004"),
}


def folder_of(n: int) -> _fs.Location:
    return JOB.child(f"chk-{n}")


class Store:
    """An in-memory loader: each folder's `_metadata`, or the error reading it raises."""

    def __init__(self, damaged: _fs.Location | None = None) -> None:
        self.damaged = damaged

    def __call__(self, folder: _fs.Location) -> dict:
        if folder == self.damaged:
            where = folder.child("_metadata")
            raise file_error(StateRestoreError(f"{where}: damaged: checksum 0x1"), where)
        for n, savepoint in SAVEPOINTS.items():
            if folder == savepoint:
                return {"checkpoint_id": n, "is_savepoint": True, "operators": {}}
        return {"checkpoint_id": int(folder.uri.rsplit("-", 1)[-1]), "operators": {}}


def test_the_jobs_savepoints_and_checkpoints_are_merged_newest_first_by_id():
    user = Candidate(_fs.Location("file:///elsewhere/savepoint-ff"))
    found = RestorePointChooser(user).candidates([5, 7], folder_of, SAVEPOINTS)
    assert [c.describe() for c in found] == [
        "savepoint 9",
        "checkpoint 7",
        "checkpoint 5",
        "savepoint 4",
        f"savepoint {user.folder}",
    ]
    assert [c.user_given for c in found] == [False, False, False, False, True]


def test_a_stop_savepoint_newer_than_every_checkpoint_is_what_a_rerun_restores():
    chooser = RestorePointChooser()
    choice = chooser.choose(chooser.candidates([7, 8], folder_of, SAVEPOINTS), Store())
    assert (choice.point.checkpoint_id, choice.note) == (9, None)
    assert choice.point.describe() == f"savepoint 9 from {SAVEPOINTS[9]}"


def test_a_checkpoint_newer_than_the_savepoint_wins():
    chooser = RestorePointChooser()
    choice = chooser.choose(chooser.candidates([8, 10], folder_of, SAVEPOINTS), Store())
    assert choice.point.describe() == f"checkpoint 10 from {folder_of(10)}"


def test_a_damaged_savepoint_of_the_job_falls_back_to_the_next_older_checkpoint():
    chooser = RestorePointChooser()
    store = Store(damaged=SAVEPOINTS[9])
    choice = chooser.choose(chooser.candidates([7, 8], folder_of, SAVEPOINTS), store)
    assert choice.point.checkpoint_id == 8
    assert choice.note == (
        f"savepoint 9 is damaged ({SAVEPOINTS[9]}/_metadata: damaged: checksum 0x1); "
        "restoring from checkpoint 8 instead"
    )


def test_an_id_with_both_a_checkpoint_folder_and_a_savepoint_is_one_candidate():
    found = RestorePointChooser().candidates([9], folder_of, SAVEPOINTS)
    assert [c.describe() for c in found] == ["checkpoint 9", "savepoint 4"]
    point = RestorePoint(found[0], {"checkpoint_id": 9})
    assert point.describe() == f"checkpoint 9 from {folder_of(9)}"
