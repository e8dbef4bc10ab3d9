"""Checkpoint storage and history on an S3-compatible server: `_metadata` is the commit."""

from __future__ import annotations

from test_history import finished_checkpoints

from barrierflow import _fs
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage, restore_folder


def storage_on(s3_server) -> FileSystemCheckpointStorage:
    storage = FileSystemCheckpointStorage(s3_server.fresh_uri("chk"), "my job")
    storage.prepare()
    return storage


def write_state_file(storage: FileSystemCheckpointStorage, checkpoint_id: int) -> None:
    _fs.write_bytes(storage.checkpoint_dir(checkpoint_id).child("1-0-run.state"), b"state")


def test_a_checkpoint_completes_when_its_metadata_is_written_after_its_state(s3_server):
    storage = storage_on(s3_server)
    write_state_file(storage, 1)
    assert storage.completed_checkpoint_ids() == []
    assert storage.incomplete_checkpoint_ids() == [1]

    storage.write_metadata(1, {"checkpoint_id": 1, "operators": {}})

    assert storage.completed_checkpoint_ids() == [1]
    assert storage.incomplete_checkpoint_ids() == []
    assert storage.latest_completed() == (1, {"checkpoint_id": 1, "operators": {}})
    assert _fs.list_dir(storage.checkpoint_dir(1)) == ["1-0-run.state", "_metadata"]
    assert storage.next_checkpoint_id() == 2


def test_retention_and_discarding_on_s3(s3_server):
    storage = storage_on(s3_server)
    for n in (1, 2, 3, 4):
        write_state_file(storage, n)
        storage.write_metadata(n, {"checkpoint_id": n, "operators": {}, "is_savepoint": n == 1})
    write_state_file(storage, 5)  # in flight

    assert storage.retain(1) == [2, 3]
    assert storage.completed_checkpoint_ids() == [1, 4]
    assert storage.incomplete_checkpoint_ids() == [5]

    storage.discard(5)
    storage.discard_all()
    assert _fs.list_dir(storage.job_dir) == []


def test_a_restore_path_keeps_the_endpoint_of_its_uri(s3_server):
    storage = storage_on(s3_server)
    storage.write_metadata(3, {"checkpoint_id": 3, "operators": {}})
    metadata_file = storage.checkpoint_dir(3).child("_metadata")
    assert restore_folder(metadata_file.uri) == storage.checkpoint_dir(3)


def test_the_history_is_rewritten_whole_where_nothing_appends(s3_server):
    job_dir = storage_on(s3_server).job_dir
    history = CheckpointHistoryFile(job_dir, limit=3)
    for stats in finished_checkpoints(range(1, 9)):
        history.append(stats, job_id="j")

    assert [s.checkpoint_id for s in history.read()] == [6, 7, 8]
    assert len(_fs.read_bytes(history.location).decode().splitlines()) <= 6
    assert _fs.list_dir(job_dir) == ["_checkpoint_history.jsonl"]  # no temporary objects
