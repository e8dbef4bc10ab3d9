"""Builds and writes snapshot files off the mailbox thread, then acknowledges or declines.

Helper thread. Each `Upload` holds a `PendingStateFile`: the sections taken at the
barrier, including keyed snapshots whose `write` (the asynchronous part: serialization,
a backend's side files) runs here while the mailbox thread processes records. Uploads
run one after another, in the order submitted (checkpoint order); each keyed snapshot
holds its own version of the state, so writing one after a later one was taken is safe.
Nothing that goes wrong with one upload (building, writing, or sending its
acknowledgement or decline) stops the thread: a failure declines that checkpoint with
its cause and later uploads go on, except a value that cannot be serialized
(ConfigurationError), which fails the task through `Upload.fail` as it did when state
was serialized at the barrier. A file is fsynced (with its folder, `_fs.sync_file`)
before the checkpoint is acknowledged. Every upload's `release` runs once, written or
not: as soon as its file is built, before the writes (so the task's heap state stops
paying copy-on-write for it while the file goes to storage), and also for an upload of an
aborted checkpoint or of a torn-down attempt, which is dropped unwritten when its turn
comes.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.subtask_state_file import PendingStateFile
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeclineCheckpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Upload:
    checkpoint_id: int
    state_file: PendingStateFile | None
    """What to build and write; None when the task has no state."""
    ack: AcknowledgeCheckpoint
    """Sent once written, with the file's handle, size and the asynchronous duration."""
    fail: Callable[[BaseException], None] | None = None
    """Fails the task with a value that cannot be serialized (else: a decline)."""

    @property
    def attempt(self) -> int:
        return self.ack.attempt


class SnapshotUploader:
    """One upload thread per task process; `submit`, `abort`, `drop_attempt` and `close`
    from the mailbox thread.

    `send` must be thread-safe (the RPC client's); whatever it raises is logged: a
    JobMaster that is gone is the mailbox thread's to notice, not this thread's.
    """

    def __init__(self, send: Callable[[Any], None], clock: Clock = SYSTEM_CLOCK) -> None:
        self._send = send
        self._clock = clock
        self._queue: queue.SimpleQueue[Upload | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        """Guards `_aborted` and `_dropped_attempts` (mailbox thread adds, this thread reads)."""
        self._aborted: set[tuple[int, int]] = set()
        """(attempt, checkpoint id) of aborted checkpoints whose upload may still be queued."""
        self._dropped_attempts: set[int] = set()
        """Attempts torn down: their queued uploads are released unwritten."""
        self._thread = threading.Thread(target=self._run, name="snapshot-upload", daemon=True)
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, upload: Upload) -> None:
        self._queue.put(upload)

    def abort(self, attempt: int, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` of `attempt` was aborted: drop its upload if it still
        waits (one already being written finishes; the JobMaster ignores its ack)."""
        with self._lock:
            self._aborted.add((attempt, checkpoint_id))

    def drop_attempt(self, attempt: int) -> None:
        """`attempt` was torn down: release its queued uploads without writing them."""
        with self._lock:
            self._dropped_attempts.add(attempt)

    def close(self, timeout: float = 30.0) -> None:
        """Finish queued uploads, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (upload := self._queue.get()) is not None:
            try:
                message = self._upload(upload)
                if message is not None:
                    self._deliver(message)
            except Exception:  # never let one checkpoint end the uploads of the later ones
                log.warning("upload of checkpoint %d failed", upload.checkpoint_id, exc_info=True)

    def _dropped(self, upload: Upload) -> bool:
        key = (upload.attempt, upload.checkpoint_id)
        with self._lock:
            if key in self._aborted:
                self._aborted.discard(key)
                return True
            # aborts of checkpoints uploaded before, or of older attempts, no longer matter
            self._aborted = {k for k in self._aborted if k > key}
            return upload.attempt in self._dropped_attempts

    def _upload(self, upload: Upload) -> AcknowledgeCheckpoint | DeclineCheckpoint | None:
        """Build and write the file: the acknowledgement with its handle and duration, a
        decline with the cause, or None (dropped, or the task was failed)."""
        started = self._clock.monotonic()
        state_file = upload.state_file
        unreleased = state_file
        try:
            if self._dropped(upload):
                log.info("dropped the upload of checkpoint %d (aborted)", upload.checkpoint_id)
                return None
            ack = upload.ack
            if state_file is not None:
                parts, handle = state_file.build()
                # encoded: the task stops protecting the snapshot now, not after the writes
                unreleased = None
                self._release(upload, state_file)
                target = state_file.location
                _fs.make_dirs(target.parent)
                _fs.write_parts(target, parts)  # never joined: a copy would hold the GIL
                size = sum(len(part) for part in parts) + state_file.side_file_bytes()
                _fs.sync_file(target)  # durable before the ack lets `_metadata` name it
                shared = state_file.shared_files()
                ack = replace(
                    ack,
                    state_handle=handle,
                    state_bytes=size + sum(file_size for _, file_size, _ in shared),
                    shared_files=tuple(shared),
                    checkpointed_bytes=size + sum(file_size for _, file_size, new in shared if new),
                )
        except ConfigurationError as error:
            if upload.fail is None:
                return self._decline(upload, error)
            upload.fail(error)  # as when state was serialized at the barrier: the task fails
            return None
        except Exception as error:
            return self._decline(upload, error)
        finally:
            if unreleased is not None:  # dropped, or the build failed
                self._release(upload, unreleased)
        return replace(ack, async_ms=(self._clock.monotonic() - started) * 1000)

    def _decline(self, upload: Upload, error: Exception) -> DeclineCheckpoint:
        log.warning("writing state of checkpoint %d failed", upload.checkpoint_id, exc_info=True)
        where = upload.state_file.location.uri if upload.state_file else "state"
        return DeclineCheckpoint(
            upload.ack.attempt,
            upload.ack.partition,
            upload.checkpoint_id,
            CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION.name,
            f"writing {where} failed: {type(error).__name__}: {error}",
        )

    @staticmethod
    def _release(upload: Upload, state_file: PendingStateFile) -> None:
        try:
            state_file.release()
        except Exception:  # the upload's outcome stands; the leak is logged
            log.warning(
                "releasing the snapshot of checkpoint %d failed",
                upload.checkpoint_id,
                exc_info=True,
            )

    def _deliver(self, message: Any) -> None:
        try:
            self._send(message)
        except Exception as error:  # the JobMaster is gone or on a newer attempt
            log.warning("could not send %s: %s", type(message).__name__, error)
