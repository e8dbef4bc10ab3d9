"""Changelog checkpoints of the heap backend through the real snapshot pipeline (no
JobMaster): each checkpoint's state file is written by the uploader into a real job folder,
its acknowledgement lists the chain's files in `shared/`, the shared-state registry (as the
driver uses it, retention 1) deletes what no retained checkpoint needs, and what is listed
is exactly what is on disk; the last checkpoint's state file restores the state."""

from __future__ import annotations

import os
import queue
from pathlib import Path
from typing import Any

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.shared_state_registry import SharedStateRegistry
from barrierflow.checkpoint.subtask_state_file import (
    HeldSections,
    PendingStateFile,
    SubtaskStateReader,
)
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange

RANGE = KeyGroupRange(0, 127)


def checkpoint(
    uploader: SnapshotUploader, sent: queue.SimpleQueue, job: _fs.Location, b: Any, n: int
) -> AcknowledgeCheckpoint:
    location = job.child(f"chk-{n}", "2-0-d.state")
    held = {"count": HeldSections(keyed=b.snapshot(n))}
    pending = PendingStateFile(location, 2, 0, (0, 127), held, None, False)
    uploader.submit(Upload(n, pending, AcknowledgeCheckpoint(0, 1, n, None)))
    ack = sent.get(timeout=30)
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.checkpoint_id == n
    return ack


def on_disk(folder: Path) -> set[str]:
    return {f"shared/{name}" for name in os.listdir(folder / "shared")}


def test_listed_shared_files_are_the_files_on_disk_and_restore(tmp_path: Path) -> None:
    job = _fs.location(str(tmp_path))
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    registry = SharedStateRegistry()
    b = HeapKeyedStateBackend(RANGE, 128, changelog=True)
    count = b.get_value_state(ValueStateDescriptor("count"))
    retained: int | None = None
    last: AcknowledgeCheckpoint | None = None
    try:
        for n in range(1, 9):
            for i in range(n * 50, n * 50 + 400):
                b.set_current_key(f"k{i % 1000}")
                count.update((count.value() or 0) + 1)
            if n % 4 == 0:
                b.set_current_key("k3")
                count.clear()
            ack = checkpoint(uploader, sent, job, b, n)
            names = [name for name, _, _ in ack.shared_files]
            if len(names) > 1:  # a delta: only it and the state file were uploaded
                assert ack.checkpointed_bytes < ack.state_bytes
            else:  # a (new) base: all
                assert names[0].endswith(".heapbase") and ack.shared_files[0][2]
            if n == 3:  # declined by the driver: its new files go unless retained ones need them
                for name in registry.unreferenced(
                    [name for name, _, new in ack.shared_files if new]
                ):
                    _fs.delete_file(job.child(*name.split("/")))
                continue
            registry.register(n, names)
            b.notify_checkpoint_complete(n)
            if retained is not None:
                for name in registry.release(retained):
                    _fs.delete_file(job.child(*name.split("/")))
            retained, last = n, ack
            assert on_disk(tmp_path) == set(names)
            for name, size, _ in ack.shared_files:
                assert (tmp_path / name).stat().st_size == size
    finally:
        uploader.close()
    assert last is not None and last.state_handle is not None
    keyed = last.state_handle.operators["count"].keyed
    assert keyed is not None
    section = SubtaskStateReader().slice(
        job.child(f"chk-{retained}", last.state_handle.file).uri, *keyed
    )
    restored = HeapKeyedStateBackend(RANGE, 128)
    restored.restore([section], job.child(f"chk-{retained}"))
    assert contents(restored) == contents(b)
    assert contents(restored)["count"]["k400"] == 8


def contents(b: HeapKeyedStateBackend) -> dict[str, dict[Any, Any]]:
    """Every state's key -> value, read back through a canonical snapshot (dict order
    within a key group may differ between a live backend and a restored chain)."""
    copy = HeapKeyedStateBackend(RANGE, 128)
    copy.restore([canonical_bytes(b)])
    return {
        name: {key: value for group in table.live for key, value in group.items()}
        for name, table in copy._tables.items()
    }
