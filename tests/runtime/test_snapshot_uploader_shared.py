"""The pipeline's part of incremental checkpoints: a checkpoint's keyed write gets the job's
`shared/` folder (a savepoint's none), and the acknowledgement carries every shared file
the subtask references, with the full and the uploaded size."""

from __future__ import annotations

import queue
from typing import Any

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.subtask_state_file import HeldSections, PendingStateFile
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange


class Incremental:
    """A keyed snapshot that uploads one new shared file and references an older one."""

    def __init__(self) -> None:
        self.shared: list[_fs.Location | None] = []

    def write(
        self,
        side_files: _fs.Location | None,
        shared: _fs.Location | None = None,
        final: bool = False,
    ) -> bytes:
        self.shared.append(shared)
        if shared is not None:
            _fs.make_dirs(shared)
            _fs.write_bytes(shared.child("new.sst"), b"n" * 300)
        return b"section"

    def shared_files(self) -> list[tuple[str, int, bool]]:
        if self.shared[-1] is None:
            return []
        return [("shared/new.sst", 300, True), ("shared/old.sst", 4000, False)]

    def release(self) -> None:
        pass


def uploaded(location: _fs.Location, operators: dict[str, Any], savepoint: bool = False):
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    held = {uid: HeldSections(keyed=keyed) for uid, keyed in operators.items()}
    pending = PendingStateFile(location, 2, 0, (0, 127), held, None, savepoint)
    uploader.submit(Upload(1, pending, AcknowledgeCheckpoint(0, 1, 1, None)))
    ack = sent.get(timeout=10)
    uploader.close()
    assert isinstance(ack, AcknowledgeCheckpoint)
    return ack


def test_a_checkpoints_ack_carries_the_shared_files_and_both_sizes(tmp_path):
    job = _fs.location(str(tmp_path / "job"))
    location = job.child("chk-1", "2-0-d.state")
    keyed = Incremental()
    heap = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128).snapshot()

    ack = uploaded(location, {"inc": keyed, "heap": heap})

    assert keyed.shared == [job.child("shared")]
    assert (tmp_path / "job" / "shared" / "new.sst").exists()
    assert ack.shared_files == (("shared/new.sst", 300, True), ("shared/old.sst", 4000, False))
    file_bytes = len(_fs.read_bytes(location))
    assert ack.state_bytes == file_bytes + 4300
    assert ack.checkpointed_bytes == file_bytes + 300


def test_a_savepoint_gets_no_shared_folder_and_references_no_shared_file(tmp_path):
    location = _fs.location(str(tmp_path)).child("savepoint-ab12cd-0123456789ab", "2-0-d.state")
    keyed = Incremental()

    ack = uploaded(location, {"inc": keyed}, savepoint=True)

    assert keyed.shared == [None]
    assert ack.shared_files == ()
    assert ack.state_bytes == ack.checkpointed_bytes == len(_fs.read_bytes(location))


def test_a_full_rocksdb_checkpoint_counts_the_files_it_uploads_beside_the_state_file(tmp_path):
    from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
    from barrierflow.state import ValueStateDescriptor
    from barrierflow.state.backends import create_keyed_backend

    backend = create_keyed_backend(
        EmbeddedRocksDBStateBackend(), KeyGroupRange(0, 127), 128, tmp_path / "local"
    )
    count = backend.get_value_state(ValueStateDescriptor("count"))
    for key in range(2_000):
        backend.set_current_key(key)
        count.update(key)
    location = _fs.location(str(tmp_path / "job")).child("chk-1", "2-0-d.state")
    try:
        ack = uploaded(location, {"count": backend.snapshot(1)})
    finally:
        backend.dispose()

    beside = sum(p.stat().st_size for p in (tmp_path / "job" / "chk-1").rglob("*") if p.is_file())
    assert beside > len(_fs.read_bytes(location))  # the SST files are the bulk of the state
    assert ack.state_bytes == ack.checkpointed_bytes == beside
    assert ack.shared_files == ()
