"""The snapshot upload thread: builds and writes state files off the mailbox thread, then
reports; keyed snapshots are written there, and every one is released exactly once."""

from __future__ import annotations

import queue
import threading
from typing import Any

import pytest

from barrierflow import _envelope, _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.checkpoint.subtask_state_file import (
    HeldSections,
    PendingStateFile,
    SubtaskStateReader,
    side_files_folder,
    state_file_name,
)
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeclineCheckpoint
from barrierflow.runtime.timers import InternalTimerService, Timer
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange

COUNT = ValueStateDescriptor("count")
SEEN = ListStateDescriptor("seen")


class Recorded:
    """A keyed snapshot around a real one: records what the uploader asks of it, and can
    hold its `write` until the test lets it go (to queue uploads behind it)."""

    def __init__(self, inner: Any = None, error: Exception | None = None) -> None:
        self.inner = inner
        self.error = error
        self.side_files: list[_fs.Location | None] = []
        self.releases = 0
        self.files_at_release: list[Any] = []
        """Paths whose existence `release` records in `released_before`."""
        self.released_before: list[bool] = []
        self.writing = threading.Event()
        self.go = threading.Event()
        self.go.set()

    def write(
        self,
        side_files: _fs.Location | None,
        shared: _fs.Location | None = None,
        final: bool = False,
    ) -> bytes:
        self.side_files.append(side_files)
        self.writing.set()
        assert self.go.wait(10)
        if self.error is not None:
            raise self.error
        return self.inner.write(side_files) if self.inner is not None else b"keyed"

    def release(self) -> None:
        self.releases += 1
        self.released_before.extend(path.exists() for path in self.files_at_release)
        if self.inner is not None:
            self.inner.release()


def pending(location: _fs.Location, keyed: Any, savepoint: bool = False) -> PendingStateFile:
    return PendingStateFile(
        location, 2, 0, (0, 127), {"op": HeldSections(keyed=keyed)}, None, savepoint
    )


def upload(location: _fs.Location, checkpoint_id: int, keyed: Any = b"state", **kw) -> Upload:
    return Upload(
        checkpoint_id,
        pending(location, keyed),
        AcknowledgeCheckpoint(0, 1, checkpoint_id, None, sync_ms=1.5),
        **kw,
    )


def keyed_section(location: _fs.Location, ack: AcknowledgeCheckpoint) -> bytes:
    handle = ack.state_handle
    assert handle is not None and handle.file == location.name
    section = handle.operators["op"].keyed
    assert section is not None
    return SubtaskStateReader().slice(location.uri, *section)


def next_message(sent: queue.SimpleQueue) -> Any:
    return sent.get(timeout=10)


def test_a_failed_upload_declines_its_checkpoint_and_later_uploads_still_happen(tmp_path):
    # issue 9, defect 2: sending the decline raised through the task's send, which turned the
    # OSError into TaskCancelled and ended the upload thread; later checkpoints never acked.
    (tmp_path / "blocked").write_text("a file where a folder should be")
    sent: queue.SimpleQueue = queue.SimpleQueue()
    failures = iter([RuntimeError("JobMaster connection hiccup")])

    def send(message):
        if isinstance(message, DeclineCheckpoint):
            sent.put(message)
            raise next(failures)
        sent.put(message)

    uploader = SnapshotUploader(send, ManualClock())
    root = _fs.location(str(tmp_path))
    uploader.submit(upload(root.child("blocked", "chk-1", "state"), 1))
    uploader.submit(upload(root.child("chk-2", "state"), 2))

    decline = next_message(sent)
    assert isinstance(decline, DeclineCheckpoint) and decline.checkpoint_id == 1
    assert decline.reason == "CHECKPOINT_ASYNC_EXCEPTION"
    assert "blocked" in decline.message  # names what it could not write, with the cause
    ack = next_message(sent)
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.checkpoint_id == 2
    assert ack.async_ms == 0.0  # durations come from the injected clock
    assert ack.sync_ms == 1.5  # the mailbox thread's part, as submitted
    assert keyed_section(root.child("chk-2", "state"), ack) == b"state"
    assert ack.state_bytes == len(_fs.read_bytes(root.child("chk-2", "state")))
    assert uploader.is_alive
    uploader.close()


def test_the_keyed_snapshot_is_written_on_the_uploader_thread_as_it_was_at_the_barrier(tmp_path):
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    count, seen = backend.get_value_state(COUNT), backend.get_list_state(SEEN)
    for key in ["a", "b"]:
        backend.set_current_key(key)
        count.update(1)
        seen.add(key)
    keyed = Recorded(backend.snapshot())
    keyed.go.clear()
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    location = _fs.location(str(tmp_path)).child("chk-1", "2-0-d.state")
    uploader.submit(upload(location, 1, keyed))
    assert keyed.writing.wait(10)  # the uploader is in write: records keep flowing meanwhile
    backend.set_current_key("a")
    count.update(2)
    seen.add("after")
    backend.set_current_key("new key")
    count.update(7)
    keyed.go.set()

    ack = next_message(sent)
    assert isinstance(ack, AcknowledgeCheckpoint)
    restored = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    restored.restore([keyed_section(location, ack)])
    restored_count, restored_seen = restored.get_value_state(COUNT), restored.get_list_state(SEEN)
    assert sorted(restored.keys("count")) == ["a", "b"]
    restored.set_current_key("a")
    assert (restored_count.value(), restored_seen.get()) == (1, ["a"])
    assert keyed.side_files == [side_files_folder(location, 0)]  # a checkpoint: its own folder
    assert keyed.releases == 1
    uploader.close()


def test_the_keyed_snapshot_is_released_once_built_before_the_file_is_written(tmp_path):
    # a held heap snapshot costs the task a copy per first write; storage can be slow
    keyed = Recorded()
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    location = _fs.location(str(tmp_path)).child("chk-1", "2-0-d.state")
    keyed.files_at_release.append(tmp_path / "chk-1" / "2-0-d.state")
    uploader.submit(upload(location, 1, keyed))
    ack = next_message(sent)
    assert isinstance(ack, AcknowledgeCheckpoint)
    assert keyed_section(location, ack) == b"keyed"
    assert (keyed.releases, keyed.released_before) == (1, [False])
    uploader.close()


@pytest.mark.parametrize("savepoint", [False, True], ids=["checkpoint", "savepoint"])
def test_timers_copied_at_the_barrier_are_encoded_by_the_uploader_as_they_were(tmp_path, savepoint):
    service = InternalTimerService(KeyGroupRange(0, 127), 128, Triggered())
    for key, timestamp in [("a", 30), ("a", 10), ("a", 20), ("b", 15)]:
        service.register_event_time_timer(key, None, timestamp)
    held = service.hold()  # the barrier
    service.advance_watermark(15)  # fires two timers before the upload
    service.register_event_time_timer("c", None, 5)

    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    location = _fs.location(str(tmp_path)).child("chk-1", "2-0-d.state")
    state_file = PendingStateFile(
        location, 2, 0, (0, 127), {"op": HeldSections(timers=held)}, None, savepoint
    )
    uploader.submit(Upload(1, state_file, AcknowledgeCheckpoint(0, 1, 1, None)))
    ack = next_message(sent)
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.state_handle is not None
    section = ack.state_handle.operators["op"].timers
    assert section is not None
    encoded = SubtaskStateReader().slice(location.uri, *section)
    header, _ = _envelope.decode(encoded, "timers")
    by_key_group = {s["key_group"]: s["event_time"] for s in header["key_groups"]}
    assert sorted(t for times in by_key_group.values() for t in times) == [10, 15, 20, 30]
    if savepoint:  # canonical: timestamps ascend within each key group
        assert all(times == sorted(times) for times in by_key_group.values())
    fired = Triggered()
    restored = InternalTimerService(KeyGroupRange(0, 127), 128, fired)
    restored.restore([encoded])
    restored.advance_watermark(100)
    assert fired.fired == [(10, "a"), (15, "b"), (20, "a"), (30, "a")]
    uploader.close()


class Triggered:
    """Records the event-time timers fired, in order."""

    def __init__(self) -> None:
        self.fired: list[tuple[int, Any]] = []

    def on_event_time(self, timer: Timer) -> None:
        self.fired.append((timer.timestamp, timer.key))

    def on_processing_time(self, timer: Timer) -> None:
        raise AssertionError("no processing-time timer was registered")


def test_a_savepoint_asks_for_canonical_keyed_state_without_side_files(tmp_path):
    keyed = Recorded()
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    location = _fs.location(str(tmp_path)).child("savepoint-1", "2-0-d.state")
    ack = AcknowledgeCheckpoint(0, 1, 1, None)
    uploader.submit(Upload(1, pending(location, keyed, savepoint=True), ack))
    assert isinstance(next_message(sent), AcknowledgeCheckpoint)
    assert keyed.side_files == [None]
    assert keyed.releases == 1
    uploader.close()


def test_a_keyed_write_that_fails_declines_with_its_cause_and_releases(tmp_path):
    keyed = Recorded(error=OSError(5, "Input/output error", "chk-1/2-0-d.state.files/0/1.sst"))
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    location = _fs.location(str(tmp_path)).child("chk-1", "2-0-d.state")
    uploader.submit(upload(location, 1, keyed))
    decline = next_message(sent)
    assert isinstance(decline, DeclineCheckpoint)
    assert decline.reason == "CHECKPOINT_ASYNC_EXCEPTION"
    assert decline.message.startswith(f"writing {location.uri} failed: OSError:")
    assert "1.sst" in decline.message
    assert keyed.releases == 1
    assert not _fs.exists(location)
    uploader.close()


def test_state_that_cannot_be_pickled_fails_the_task_naming_state_and_key(tmp_path):
    # As when the snapshot was pickled at the barrier: the task fails with the
    # ConfigurationError (through the mailbox), no decline is sent.
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    backend.set_current_key("a")
    backend.get_value_state(COUNT).update(threading.Lock())
    keyed = Recorded(backend.snapshot())
    sent: queue.SimpleQueue = queue.SimpleQueue()
    failed: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    location = _fs.location(str(tmp_path)).child("chk-1", "2-0-d.state")
    uploader.submit(upload(location, 1, keyed, fail=failed.put))
    uploader.submit(upload(location.parent.parent.child("chk-2", "s"), 2))
    error = failed.get(timeout=10)
    assert isinstance(error, ConfigurationError)
    assert "the value of state 'count' for key 'a' cannot be pickled" in str(error)
    ack = next_message(sent)  # the next checkpoint's upload still runs
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.checkpoint_id == 2
    assert sent.empty()
    assert keyed.releases == 1
    uploader.close()


def test_an_aborted_or_torn_down_checkpoint_is_released_unwritten(tmp_path):
    first = Recorded()
    first.go.clear()
    aborted, dropped = Recorded(), Recorded()
    sent: queue.SimpleQueue = queue.SimpleQueue()
    uploader = SnapshotUploader(sent.put, ManualClock())
    root = _fs.location(str(tmp_path))
    uploader.submit(upload(root.child("chk-1", "s"), 1, first))
    assert first.writing.wait(10)  # holds the thread: the next two wait in the queue
    uploader.submit(upload(root.child("chk-2", "s"), 2, aborted))
    uploader.submit(upload(root.child("chk-3", "s"), 3, dropped))
    uploader.abort(0, 2)
    uploader.drop_attempt(0)
    first.go.set()
    ack = next_message(sent)
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.checkpoint_id == 1
    uploader.close()
    assert sent.empty()
    assert (aborted.side_files, dropped.side_files) == ([], [])
    assert (first.releases, aborted.releases, dropped.releases) == (1, 1, 1)
    assert not _fs.exists(root.child("chk-2")) and not _fs.exists(root.child("chk-3"))


def test_side_files_lie_in_the_checkpoint_folder_and_go_with_its_discard(tmp_path):
    storage = FileSystemCheckpointStorage(str(tmp_path), "job")
    storage.prepare()
    location = storage.checkpoint_dir(4).child(state_file_name(2, 1, "run-3"))
    folder = side_files_folder(location, 0)
    assert folder.parent == location.parent  # inside chk-4/, named after the state file
    assert side_files_folder(location, 1) != folder
    other_attempt = storage.checkpoint_dir(4).child(state_file_name(2, 1, "run-4"))
    assert side_files_folder(other_attempt, 0) != folder
    _fs.make_dirs(folder.child("nested"))
    _fs.write_bytes(folder.child("nested", "000012.sst"), b"sst")
    _fs.write_bytes(location, b"state")
    storage.discard(4)
    assert not _fs.exists(storage.checkpoint_dir(4))
