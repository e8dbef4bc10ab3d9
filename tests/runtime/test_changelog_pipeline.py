"""Changelog checkpoints of the heap backend through the real snapshot pipeline (no
JobMaster): each checkpoint's state file is written by the uploader into a real job folder,
its acknowledgement lists the chain's files in `shared/`, the driver's checkpoint storage
(`shared_checkpoints.RetainOne`, retention 1) deletes what no retained checkpoint needs, and
what is listed is exactly what is on disk; the last checkpoint's state file restores the
state. The job's final checkpoint extends the chains instead of starting new ones."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from shared_checkpoints import RetainOne, upload

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.subtask_state_file import (
    HeldSections,
)
from barrierflow.runtime.snapshot_uploader import SnapshotUploader
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint
from barrierflow.runtime.timers import InternalTimerService
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.heap_changelog import MAX_DELTAS
from barrierflow.state.key_groups import KeyGroupRange

RANGE = KeyGroupRange(0, 127)


def test_listed_shared_files_are_the_files_on_disk_and_restore(tmp_path: Path) -> None:
    driver = RetainOne(str(tmp_path))
    job = driver.job
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    b = HeapKeyedStateBackend(RANGE, 128, changelog=True)
    count = b.get_value_state(ValueStateDescriptor("count"))
    last: AcknowledgeCheckpoint | None = None
    try:
        for n in range(1, 9):
            for i in range(n * 50, n * 50 + 400):
                b.set_current_key(f"k{i % 1000}")
                count.update((count.value() or 0) + 1)
            if n % 4 == 0:
                b.set_current_key("k3")
                count.clear()
            ack = upload(uploader, sent, job, n, {"count": HeldSections(keyed=b.snapshot(n))})
            names = [name for name, _, _ in ack.shared_files]
            if len(names) > 1:  # a delta: only it and the state file were uploaded
                assert ack.checkpointed_bytes < ack.state_bytes
            else:  # a (new) base: all
                assert names[0].endswith(".heapbase") and ack.shared_files[0][2]
            if n == 3:  # declined by the driver: its new files go unless retained ones need them
                driver.declined(ack)
                continue
            driver.completed(ack)
            b.notify_checkpoint_complete(n)
            last = ack
            assert driver.shared_on_disk() == set(names)
            for name, size, _ in ack.shared_files:
                assert _fs.file_size(job.child(*name.split("/"))) == size
    finally:
        uploader.close()
    assert last is not None and last.state_handle is not None
    section, chk = driver.read_section(last, last.state_handle.operators["count"].keyed)
    restored = HeapKeyedStateBackend(RANGE, 128)
    restored.restore([section], chk)
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


def test_the_final_checkpoint_adds_deltas_where_a_checkpoint_writes_new_bases(
    tmp_path: Path,
) -> None:
    """Keyed state and timers whose chains reached `MAX_DELTAS`: the job's final checkpoint
    adds a delta to each (a bounded job ends after it; writing the whole state again would
    only delay the end) and restores exactly, where a checkpoint writes new bases."""
    driver = RetainOne(str(tmp_path))
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    b = HeapKeyedStateBackend(RANGE, 128, changelog=True)
    count = b.get_value_state(ValueStateDescriptor("count"))
    timers = InternalTimerService(RANGE, 128, Fired())
    timers.enable_changelog()

    def checkpoint(n: int, final: bool = False) -> AcknowledgeCheckpoint:
        for i in range(n, n + (3_000 if n == 1 else 20)):  # deltas stay under DELTA_RATIO
            b.set_current_key(f"k{i}")
            count.update((count.value() or 0) + 1)
            timers.register_event_time_timer(f"k{i}", None, i)
        held = HeldSections(keyed=b.snapshot(n), timers=timers.hold(n))
        ack = upload(uploader, sent, driver.job, n, {"count": held}, final)
        driver.completed(ack)
        b.notify_checkpoint_complete(n)
        timers.notify_checkpoint_complete(n)
        return ack

    def new_files(ack: AcknowledgeCheckpoint) -> list[str]:
        return sorted(name.rsplit(".", 1)[1] for name, _, new in ack.shared_files if new)

    try:
        for n in range(1, MAX_DELTAS + 2):
            checkpoint(n)
        final = checkpoint(MAX_DELTAS + 2, final=True)
        assert new_files(final) == ["heapdelta", "timerdelta"]
        assert len(final.shared_files) == 2 * (MAX_DELTAS + 2), "two chains one delta longer"
        handle = final.state_handle
        assert handle is not None
        section, chk = driver.read_section(final, handle.operators["count"].keyed)
        restored = HeapKeyedStateBackend(RANGE, 128)
        restored.restore([section], chk)
        assert contents(restored) == contents(b)
        data, chk = driver.read_section(final, handle.operators["count"].timers)
        restored_timers = InternalTimerService(RANGE, 128, Fired())
        restored_timers.restore([data], chk)
        assert timer_contents(restored_timers) == timer_contents(timers)
        assert new_files(checkpoint(MAX_DELTAS + 3)) == ["heapbase", "timerbase"]
    finally:
        uploader.close()


class Fired:
    def on_event_time(self, timer: Any) -> None:
        raise AssertionError(f"no timer fires here: {timer}")

    on_processing_time = on_event_time


def timer_contents(timers: InternalTimerService) -> set[Any]:
    return {timer for group in timers._event_time._by_key_group.values() for timer in group}
