"""Filesystem checkpoint storage: folders per checkpoint, `_metadata` last, retention."""

from __future__ import annotations

import os

import pytest

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.checkpoint import retry
from barrierflow.checkpoint.retry import Backoff
from barrierflow.checkpoint.storage import (
    METADATA_KIND,
    FileSystemCheckpointStorage,
    check_files,
    job_folder_name,
    restore_folder,
)
from barrierflow.errors import (
    CheckpointStorageError,
    CheckpointStorageUnavailableError,
    StateRestoreError,
)


@pytest.fixture
def quick_retries(monkeypatch):
    """Two tries without a wait, so a storage fault gives up at once."""
    monkeypatch.setattr(retry, "DEFAULT_BACKOFF", Backoff(attempts=2, first_delay_s=0))


def storage_with(tmp_path, completed=(), incomplete=(), savepoints=()):
    storage = FileSystemCheckpointStorage(str(tmp_path), "my job")
    storage.prepare()
    for n in sorted({*completed, *savepoints}):
        metadata = {"checkpoint_id": n, "operators": {}}
        if n in savepoints:
            metadata["is_savepoint"] = True
        storage.write_metadata(n, metadata)
    for n in incomplete:
        (tmp_path / "my_job" / f"chk-{n}").mkdir(parents=True)
    return storage


def test_a_job_name_becomes_a_safe_folder_name():
    assert job_folder_name("word count/v2") == "word_count_v2"
    assert job_folder_name("...") == "job"


def test_only_folders_with_metadata_count_as_completed(tmp_path):
    storage = storage_with(tmp_path, completed=(1, 3), incomplete=(2, 4))
    assert storage.completed_checkpoint_ids() == [1, 3]
    assert storage.latest_completed()[0] == 3


def test_new_checkpoint_ids_go_above_every_folder_even_incomplete_ones(tmp_path):
    assert storage_with(tmp_path).next_checkpoint_id() == 1
    assert storage_with(tmp_path, completed=(1,), incomplete=(7,)).next_checkpoint_id() == 8


def test_metadata_round_trips(tmp_path):
    storage = storage_with(tmp_path)
    metadata = {"checkpoint_id": 5, "operators": {"a": {"subtasks": [1, 2]}}}
    storage.write_metadata(5, metadata)
    assert storage.load_metadata(5) == metadata
    assert [p.name for p in (tmp_path / "my_job" / "chk-5").iterdir()] == ["_metadata"]


def test_retain_keeps_the_newest_completed_and_removes_older_and_abandoned_folders(tmp_path):
    storage = storage_with(tmp_path, completed=(1, 2, 4), incomplete=(3, 5))
    removed = storage.retain(2)
    assert removed == [1, 3]
    assert storage.completed_checkpoint_ids() == [2, 4]
    assert (tmp_path / "my_job" / "chk-5").is_dir()  # newer than the newest: may be in flight


def test_an_unwritable_folder_is_named_in_the_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    storage = FileSystemCheckpointStorage(str(blocker / "checkpoints"), "job")
    with pytest.raises(CheckpointStorageError, match="not writable"):
        storage.prepare()


# ---- retention never deletes a savepoint (issue 9, defect 3) ------------------------------------


def test_retain_never_deletes_a_savepoint_and_does_not_count_it_as_a_retained_checkpoint(
    tmp_path,
):
    storage = storage_with(tmp_path, completed=(1, 3, 5, 6), savepoints=(2, 4))

    removed = storage.retain(1)

    assert removed == [1, 3, 5]
    assert storage.completed_checkpoint_ids() == [2, 4, 6]
    assert storage.is_savepoint(2) and storage.is_savepoint(4) and not storage.is_savepoint(6)


def test_retain_keeps_a_folder_whose_metadata_it_cannot_read(tmp_path):
    storage = storage_with(tmp_path, completed=(1, 2, 3))
    metadata = tmp_path / "my_job" / "chk-1" / "_metadata"
    metadata.write_bytes(metadata.read_bytes()[:-3])  # truncated: savepoint or not, unknown

    assert storage.retain(1) == [2]
    assert (tmp_path / "my_job" / "chk-1").is_dir()


# ---- read errors name the file (issue 9, defect 6) -----------------------------------------------


def damage(path, how: str) -> None:
    """Truncate the file, flip one byte of it, or put a folder in its place."""
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flipped":
        at = len(data) - 2
        path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :])
    else:
        os.remove(path)
        path.mkdir()


@pytest.mark.parametrize(
    "how, error",
    [
        ("truncated", StateRestoreError),
        ("flipped", StateRestoreError),
        ("a-folder", CheckpointStorageUnavailableError),
    ],
)
def test_a_damaged_or_unreadable_metadata_file_is_named_in_the_error(
    tmp_path, how, error, quick_retries
):
    storage = storage_with(tmp_path, completed=(4,))
    path = tmp_path / "my_job" / "chk-4" / "_metadata"
    damage(path, how)

    with pytest.raises(error, match=f"file://{path}") as raised:
        storage.load_metadata(4)

    assert raised.value.__cause__ is not None


def test_a_metadata_file_of_another_kind_is_named_in_the_error(tmp_path):
    storage = storage_with(tmp_path, completed=(4,))
    path = tmp_path / "my_job" / "chk-4" / "_metadata"
    path.write_bytes(envelope.encode("subtask-state", {}, b""))

    with pytest.raises(StateRestoreError, match=f"file://{path}: expected a '{METADATA_KIND}'"):
        storage.load_metadata(4)


def test_retention_never_deletes_a_protected_checkpoint(tmp_path):
    # A checkpoint of the job's own folder restored with --from-savepoint in no-claim mode.
    storage = storage_with(tmp_path, completed=(1, 2, 3))
    storage.protected.add(1)
    assert storage.retain(1) == [2]
    assert storage.completed_checkpoint_ids() == [1, 3]


def test_a_restore_path_is_the_folder_or_its_metadata_file(tmp_path):
    assert restore_folder(str(tmp_path / "sp")).uri == f"file://{tmp_path}/sp"
    assert restore_folder(str(tmp_path / "sp" / "_metadata")).uri == f"file://{tmp_path}/sp"


def metadata_naming(file: str, keyed=(0, 10), channel=None) -> dict:
    entry = {"subtask": 0, "file": file, "key_group_range": [0, 127], "keyed": list(keyed)}
    metadata = {"operators": {"count": {"name": "Reduce", "subtasks": [entry]}}}
    if channel is not None:
        metadata["channel_state"] = {
            "subtasks": [
                {
                    "uid": "count",
                    "subtask": 0,
                    "file": file,
                    "offset": channel[0],
                    "length": channel[1],
                }
            ]
        }
    return metadata


def test_the_cheap_check_names_a_missing_state_file_as_damage(tmp_path):
    folder = _fs.location(tmp_path)
    with pytest.raises(
        StateRestoreError, match=f"file://{tmp_path}/a.state: it is missing"
    ) as raised:
        check_files(folder, metadata_naming("a.state"))
    assert raised.value.file == f"file://{tmp_path}/a.state"


def test_the_cheap_check_names_a_state_file_too_short_for_its_sections(tmp_path):
    (tmp_path / "a.state").write_bytes(b"x" * 50)
    check_files(_fs.location(tmp_path), metadata_naming("a.state", keyed=(10, 40)))
    with pytest.raises(StateRestoreError, match=r"a.state is truncated: 50 bytes, .* need 60"):
        check_files(_fs.location(tmp_path), metadata_naming("a.state", channel=(20, 40)))


def test_deleting_on_cancellation_spares_a_protected_checkpoint(tmp_path):
    """A checkpoint of the job's folder restored in no-claim mode is not the job's to delete."""
    storage = storage_with(tmp_path, completed=(1, 2, 4), incomplete=(5,))
    storage.protected.add(2)

    storage.discard_all()

    assert storage.completed_checkpoint_ids() == [2]
    assert sorted(p.name for p in (tmp_path / "my_job").iterdir() if p.name.startswith("chk-")) == [
        "chk-2"
    ]


# ---- storage faults: not damage, never fatal after a checkpoint completed (issue 21) ------


def test_a_fault_listing_the_folder_is_retried(tmp_path, storage_faults):
    storage = storage_with(tmp_path, completed=(1, 2))
    storage_faults("list:*/my_job:1:2")  # two faults, then an answer (the default 5 tries)

    assert storage.completed_checkpoint_ids() == [1, 2]


def test_a_fault_reading_metadata_that_outlives_the_retries_is_unavailable_storage(
    tmp_path, storage_faults, quick_retries
):
    storage = storage_with(tmp_path, completed=(3,))
    storage_faults("read:*/chk-3/_metadata:1:2")

    with pytest.raises(CheckpointStorageUnavailableError, match="chk-3/_metadata") as raised:
        storage.load_metadata(3)

    assert raised.value.file.endswith("chk-3/_metadata")
    assert storage.load_metadata(3)["checkpoint_id"] == 3  # the file was sound all along


def test_a_folder_retention_cannot_delete_now_goes_at_the_next_retention(tmp_path, storage_faults):
    storage = storage_with(tmp_path, completed=(1, 2, 3))
    storage_faults("delete:*/chk-1:1")

    assert storage.retain(1) == [2]  # chk-1 failed: logged, left, nothing raised
    assert storage.completed_checkpoint_ids() == [1, 3]

    storage.write_metadata(4, {"checkpoint_id": 4, "operators": {}})
    assert storage.retain(1) == [1, 3]
    assert storage.completed_checkpoint_ids() == [4]


def test_a_discarded_folder_that_cannot_be_deleted_is_deleted_at_the_next_retention(
    tmp_path, storage_faults
):
    storage = storage_with(tmp_path, completed=(1,))
    aborted = tmp_path / "savepoints" / "savepoint-ab12cd-0123456789ab"
    aborted.mkdir(parents=True)
    storage_faults(f"delete:*{aborted.name}:1")

    assert storage.discard_folder(_fs.location(aborted)) is False  # logged, remembered
    assert aborted.is_dir()

    storage.retain(1)
    assert not aborted.exists()


# ---- durability (issue 21) ---------------------------------------------------------------


def test_metadata_is_fsynced_with_its_folder_and_the_job_folder(tmp_path):
    storage = storage_with(tmp_path)
    synced: list[str] = []
    remove = _fs.add_hook(lambda kind, loc: synced.append(loc.path) if kind == "sync" else None)
    try:
        storage.write_metadata(7, {"checkpoint_id": 7, "operators": {}})
    finally:
        remove()

    job = f"{tmp_path}/my_job"
    temporary, *folders = synced
    assert temporary.startswith(f"{job}/chk-7/._metadata.") and temporary.endswith(".tmp")
    assert folders == [f"{job}/chk-7", job]  # the rename into chk-7, chk-7 into the job folder
