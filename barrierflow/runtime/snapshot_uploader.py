"""Writes snapshot files off the mailbox thread, then acknowledges the checkpoint.

Helper thread; it holds only bytes and messages, never operator objects.
Uploads run one after another, in checkpoint order.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from barrierflow import _fs
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
    def __init__(self, send: Callable[[Any], None]) -> None:
        self._send = send
        self._queue: queue.SimpleQueue[Upload | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="snapshot-upload", daemon=True)
        self._thread.start()

    def submit(self, upload: Upload) -> None:
        self._queue.put(upload)

    def close(self, timeout: float = 30.0) -> None:
        """Finish queued uploads, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while (upload := self._queue.get()) is not None:
            started = time.monotonic()
            try:
                if upload.target is not None:
                    parent_uri = upload.target.uri.rsplit("/", 1)[0]
                    _fs.make_dirs(_fs.Location(parent_uri))
                    _fs.write_bytes(upload.target, upload.data)
            except Exception as error:
                log.warning(
                    "writing state of checkpoint %d failed", upload.checkpoint_id, exc_info=True
                )
                self._deliver(
                    DeclineCheckpoint(
                        upload.ack.attempt,
                        upload.ack.partition,
                        upload.checkpoint_id,
                        CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION.name,
                        f"{type(error).__name__}: {error}",
                    )
                )
                continue
            async_ms = (time.monotonic() - started) * 1000
            self._deliver(replace(upload.ack, async_ms=async_ms))

    def _deliver(self, message: Any) -> None:
        # The JobMaster may be gone or on a newer attempt: then there is nothing to acknowledge.
        with contextlib.suppress(OSError):
            self._send(message)
