"""Writes snapshot files off the mailbox thread, then acknowledges or declines the checkpoint.

Helper thread; it holds only bytes and messages, never operator objects.
Uploads run one after another, in checkpoint order. Nothing that goes wrong with
one upload (writing, or sending its acknowledgement or decline) stops the thread:
a failed write declines that checkpoint with its cause, and later uploads go on. A file
is fsynced (with its folder, `_fs.sync_file`) before the checkpoint is acknowledged.
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
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeclineCheckpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Upload:
    checkpoint_id: int
    target: _fs.Location | None
    """Where the state file goes; None when the task has no state."""
    data: bytes
    ack: AcknowledgeCheckpoint


class SnapshotUploader:
    """One upload thread per task process; `submit` and `close` from the mailbox thread.

    `send` must be thread-safe (the RPC client's); whatever it raises is logged: a
    JobMaster that is gone is the mailbox thread's to notice, not this thread's.
    """

    def __init__(self, send: Callable[[Any], None], clock: Clock = SYSTEM_CLOCK) -> None:
        self._send = send
        self._clock = clock
        self._queue: queue.SimpleQueue[Upload | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="snapshot-upload", daemon=True)
        self._thread.start()

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, upload: Upload) -> None:
        self._queue.put(upload)

    def close(self, timeout: float = 30.0) -> None:
        """Finish queued uploads, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (upload := self._queue.get()) is not None:
            try:
                self._deliver(self._upload(upload))
            except Exception:  # never let one checkpoint end the uploads of the later ones
                log.warning("upload of checkpoint %d failed", upload.checkpoint_id, exc_info=True)

    def _upload(self, upload: Upload) -> AcknowledgeCheckpoint | DeclineCheckpoint:
        """Write the file; the acknowledgement with its duration, or a decline with the cause."""
        started = self._clock.monotonic()
        try:
            if upload.target is not None:
                _fs.make_dirs(upload.target.parent)
                _fs.write_bytes(upload.target, upload.data)
                _fs.sync_file(upload.target)  # durable before the ack lets `_metadata` name it
        except Exception as error:
            log.warning(
                "writing state of checkpoint %d failed", upload.checkpoint_id, exc_info=True
            )
            return DeclineCheckpoint(
                upload.ack.attempt,
                upload.ack.partition,
                upload.checkpoint_id,
                CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION.name,
                f"writing {upload.target.uri if upload.target else 'state'} failed: "
                f"{type(error).__name__}: {error}",
            )
        return replace(upload.ack, async_ms=(self._clock.monotonic() - started) * 1000)

    def _deliver(self, message: Any) -> None:
        try:
            self._send(message)
        except Exception as error:  # the JobMaster is gone or on a newer attempt
            log.warning("could not send %s: %s", type(message).__name__, error)
