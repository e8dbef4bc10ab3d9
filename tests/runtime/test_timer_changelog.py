"""Changelog checkpoints of timers (`runtime/timers/changelog.py`): a checkpoint uploads
the timers added and removed since the last completed one, and a manifest's chain restores
exactly the timers of its barrier, at any parallelism, through the real uploader."""

from __future__ import annotations

import os
import queue
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shared_checkpoints import RetainOne, upload

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.shared_state_registry import SharedStateRegistry
from barrierflow.checkpoint.subtask_state_file import (
    HeldSections,
)
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.snapshot_uploader import SnapshotUploader
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint
from barrierflow.runtime.timers import InternalTimerService
from barrierflow.runtime.timers.changelog import TimerChangelogSnapshot
from barrierflow.state.key_groups import KeyGroupRange

RANGE = KeyGroupRange(0, 127)


class Fired:
    def __init__(self) -> None:
        self.timers: list[Any] = []

    def on_event_time(self, timer: Any) -> None:
        self.timers.append(timer)

    def on_processing_time(self, timer: Any) -> None:
        self.timers.append(timer)


def service(key_groups: KeyGroupRange = RANGE, changelog: bool = True) -> InternalTimerService:
    timers = InternalTimerService(key_groups, 128, Fired())
    if changelog:
        timers.enable_changelog()
    return timers


def contents(timers: InternalTimerService) -> set[tuple[str, int, Any, Any]]:
    """Every timer of `timers` as (domain, timestamp, key, namespace)."""
    found = set()
    for domain, queue_ in (("event", timers._event_time), ("processing", timers._processing_time)):
        for group in queue_._by_key_group.values():
            found |= {(domain, *timer) for timer in group}
    return found


def restored(
    section: bytes, chk: _fs.Location, key_groups: KeyGroupRange = RANGE
) -> InternalTimerService:
    into = service(key_groups, changelog=False)
    into.restore([section], chk)
    return into


def write(timers: InternalTimerService, job: _fs.Location, checkpoint_id: int) -> bytes:
    held = timers.hold(checkpoint_id)
    assert isinstance(held, TimerChangelogSnapshot)
    return held.write(job.child("shared"))


def a_base_then_a_delta(job: _fs.Location) -> tuple[InternalTimerService, bytes]:
    """Checkpoint 1 (timer "a", completed: a base) and 2 (timer "b" added: a delta, not yet
    completed): the service and checkpoint 2's manifest."""
    timers = service()
    timers.register_event_time_timer("a", None, 10)
    write(timers, job, 1)
    timers.notify_checkpoint_complete(1)
    timers.register_event_time_timer("b", None, 20)
    return timers, write(timers, job, 2)


def shared_names(folder: Path) -> set[str]:
    return set(os.listdir(folder / "shared"))


def test_a_delta_holds_the_timers_changed_and_the_chain_restores_them(tmp_path: Path) -> None:
    job = _fs.location(str(tmp_path))
    timers = service()
    for i in range(100_000):
        timers.register_event_time_timer(f"auction-{i}", None, 1_000 + i)
    base = write(timers, job, 1)
    timers.notify_checkpoint_complete(1)
    assert restored(base, job.child("chk-1")).num_event_time_timers() == 100_000
    (base_file,) = shared_names(tmp_path)
    assert base_file.endswith(".timerbase")

    # 1 % changed: 500 added, 500 fired, 10 deleted, one processing-time timer
    for i in range(100_000, 100_500):
        timers.register_event_time_timer(f"auction-{i}", None, 1_000 + i)
    timers.advance_watermark(1_499)
    for i in range(5_000, 5_010):
        timers.delete_event_time_timer(f"auction-{i}", None, 1_000 + i)
    timers.register_processing_time_timer("session", "window", 77)
    manifest = write(timers, job, 2)
    timers.notify_checkpoint_complete(2)

    (delta_file,) = shared_names(tmp_path) - {base_file}
    assert delta_file.endswith(".timerdelta")
    sizes = {name: (tmp_path / "shared" / name).stat().st_size for name in (base_file, delta_file)}
    assert sizes[delta_file] < 0.05 * sizes[base_file]
    back = restored(manifest, job.child("chk-2"))
    assert contents(back) == contents(timers)
    assert back.num_event_time_timers() == 100_000 + 500 - 500 - 10
    assert back.num_processing_time_timers() == 1


def test_a_chain_restores_at_another_parallelism(tmp_path: Path) -> None:
    job = _fs.location(str(tmp_path))
    timers = service()
    for checkpoint_id in range(1, 5):
        for i in range(checkpoint_id * 100, checkpoint_id * 100 + 300):
            timers.register_event_time_timer(i, ("window", i % 7), i * 10)
        timers.advance_watermark(checkpoint_id * 1_500)
        manifest = write(timers, job, checkpoint_id)
        timers.notify_checkpoint_complete(checkpoint_id)
    halves = [KeyGroupRange(0, 40), KeyGroupRange(41, 127)]
    parts = [restored(manifest, job.child("chk-4"), half) for half in halves]
    assert contents(parts[0]) | contents(parts[1]) == contents(timers)
    assert not contents(parts[0]) & contents(parts[1])
    assert all(contents(part) for part in parts)


def test_changes_of_a_checkpoint_not_completed_go_into_the_next_delta(tmp_path: Path) -> None:
    job = _fs.location(str(tmp_path))
    timers = service()
    timers.register_event_time_timer("a", None, 10)
    write(timers, job, 1)
    timers.notify_checkpoint_complete(1)
    timers.register_event_time_timer("b", None, 20)
    write(timers, job, 2)  # never completes: 3 must not build on it
    timers.register_event_time_timer("c", None, 30)
    savepoint = timers.hold(3).encode(ordered=True)  # a savepoint: canonical, no chain
    timers.notify_checkpoint_complete(3)
    timers.delete_event_time_timer("a", None, 10)
    manifest = write(timers, job, 4)
    assert contents(restored(manifest, job.child("chk-4"))) == {
        ("event", 20, "b", None),
        ("event", 30, "c", None),
    }
    assert {key for _, _, key, _ in contents(restored(savepoint, job.child("chk-3")))} == {
        "a",
        "b",
        "c",
    }


def test_after_a_restore_the_next_checkpoint_writes_a_new_base(tmp_path: Path) -> None:
    job = _fs.location(str(tmp_path))
    timers, manifest = a_base_then_a_delta(job)
    timers.notify_checkpoint_complete(2)
    again = service()
    again.restore([manifest], job.child("chk-2"))
    before = shared_names(tmp_path)
    again_manifest = write(again, job, 3)
    (new,) = shared_names(tmp_path) - before
    assert new.endswith(".timerbase")
    assert contents(restored(again_manifest, job.child("chk-3"))) == contents(timers)


operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 30), st.integers(0, 60)),
        st.tuples(st.just("delete"), st.integers(0, 30), st.integers(0, 60)),
        st.tuples(st.just("fire"), st.integers(0, 60)),
        st.tuples(st.just("checkpoint"), st.booleans()),
        st.tuples(st.just("savepoint")),
    ),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(operations)
def test_every_manifest_restores_its_barriers_timers(steps: list[tuple[Any, ...]]) -> None:
    """Random registrations, deletions, firings and checkpoints (completed or not) and
    savepoints: each checkpoint's manifest restores exactly the timers at its barrier."""
    with tempfile.TemporaryDirectory() as folder:
        job = _fs.location(folder)
        timers = service()
        checkpoint_id = 0
        for step in steps:
            if step[0] == "add":
                timers.register_event_time_timer(step[1], step[1] % 3, step[2])
                timers.register_processing_time_timer(step[1], None, step[2])
            elif step[0] == "delete":
                timers.delete_event_time_timer(step[1], step[1] % 3, step[2])
            elif step[0] == "fire":
                timers.advance_watermark(step[1])
                timers.on_processing_time(step[1] // 2)
            else:
                checkpoint_id += 1
                at_barrier = contents(timers)
                held = timers.checkpoint(checkpoint_id)
                if held is None:  # no timers: no section
                    assert at_barrier == set()
                else:
                    if step[0] == "savepoint":
                        section = held.encode(ordered=True)
                    else:
                        section = held.write(job.child("shared"))
                    back = restored(section, job.child(f"chk-{checkpoint_id}"))
                    assert contents(back) == at_barrier
                if step[0] == "savepoint" or step[1]:
                    timers.notify_checkpoint_complete(checkpoint_id)


def test_the_uploader_lists_the_chain_and_the_driver_keeps_what_is_retained(
    tmp_path: Path,
) -> None:
    """Retention 1, through the driver's checkpoint storage: after each completed checkpoint
    the files the acknowledgement lists are exactly the files in shared/, and the last
    state file's timers section restores the timers."""
    driver = RetainOne(str(tmp_path))
    job = driver.job
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    timers = service()
    last: AcknowledgeCheckpoint | None = None
    longest = 0
    for i in range(5_000):  # long-lived timers: a delta is a small part of the state
        timers.register_processing_time_timer(f"session-{i}", None, 10**9 + i)
    try:
        for n in range(1, 40):
            for i in range(n * 20, n * 20 + 200):
                timers.register_event_time_timer(f"k{i}", None, i)
            timers.advance_watermark(n * 20 + 100)
            held = {"q9-winning-bid": HeldSections(timers=timers.hold(n))}
            ack = upload(uploader, sent, job, n, held)
            names = [name for name, _, _ in ack.shared_files]
            assert names[0].endswith(".timerbase")
            assert all(name.endswith(".timerdelta") for name in names[1:])
            if n == 3:  # declined by the driver
                driver.declined(ack)
                continue
            driver.completed(ack)
            timers.notify_checkpoint_complete(n)
            last, longest = ack, max(longest, len(names))
            assert driver.shared_on_disk() == set(names)
    finally:
        uploader.close()
    assert last is not None and last.state_handle is not None
    data, chk = driver.read_section(last, last.state_handle.operators["q9-winning-bid"].timers)
    assert contents(restored(data, chk)) == contents(timers)
    assert longest > 10, "the chain never grew"


def test_a_checkpoint_without_timers_ends_the_chain_so_no_released_file_is_needed(
    tmp_path: Path,
) -> None:
    """Retention 1: checkpoint 2 has no timers section, so completing it releases the
    files of checkpoint 1's chain; the timers registered after it start a new base."""
    job = _fs.location(str(tmp_path))
    registry = SharedStateRegistry()
    timers = service()
    timers.register_event_time_timer("a", None, 10)
    first = timers.checkpoint(1)
    assert isinstance(first, TimerChangelogSnapshot)
    first.write(job.child("shared"))
    registry.register(1, [name for name, _, _ in first.shared_files()])
    timers.notify_checkpoint_complete(1)

    timers.advance_watermark(10)  # fires the only timer
    assert timers.checkpoint(2) is None
    registry.register(2, [])
    timers.notify_checkpoint_complete(2)
    for name in registry.release(1):
        _fs.delete_file(job.child(*name.split("/")))
    assert shared_names(tmp_path) == set()

    timers.register_event_time_timer("b", None, 20)
    third = timers.checkpoint(3)
    assert isinstance(third, TimerChangelogSnapshot)
    manifest = third.write(job.child("shared"))
    assert [name.endswith(".timerbase") for name, _, _ in third.shared_files()] == [True]
    assert contents(restored(manifest, job.child("chk-3"))) == {("event", 20, "b", None)}


def test_a_missing_or_short_chain_file_is_named_in_a_restore_error(tmp_path: Path) -> None:
    job = _fs.location(str(tmp_path))
    _, manifest = a_base_then_a_delta(job)
    (delta,) = [name for name in shared_names(tmp_path) if name.endswith(".timerdelta")]
    (tmp_path / "shared" / delta).write_bytes(b"short")
    with pytest.raises(StateRestoreError, match=f"{delta} has 5 bytes, the manifest says"):
        restored(manifest, job.child("chk-2"))
    (tmp_path / "shared" / delta).unlink()
    with pytest.raises(StateRestoreError, match=f"timers-delta file .*{delta} cannot be read"):
        restored(manifest, job.child("chk-2"))
    with pytest.raises(StateRestoreError, match="checkpoint folder, which was not given"):
        restored(manifest, None)  # type: ignore[arg-type]
