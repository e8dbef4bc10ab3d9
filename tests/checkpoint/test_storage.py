"""Filesystem checkpoint storage: folders per checkpoint, `_metadata` last, retention."""

from __future__ import annotations

import pytest

from barrierflow.checkpoint.storage import FileSystemCheckpointStorage, job_folder_name
from barrierflow.errors import CheckpointStorageError


def storage_with(tmp_path, completed=(), incomplete=()):
    storage = FileSystemCheckpointStorage(str(tmp_path), "my job")
    storage.prepare()
    for n in completed:
        storage.write_metadata(n, {"checkpoint_id": n, "operators": {}})
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
