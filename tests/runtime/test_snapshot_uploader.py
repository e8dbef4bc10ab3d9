"""The snapshot upload thread: writes state files off the mailbox thread, then reports."""

from __future__ import annotations

import queue

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeclineCheckpoint


def upload(target: _fs.Location, checkpoint_id: int) -> Upload:
    return Upload(checkpoint_id, target, b"state", AcknowledgeCheckpoint(0, 1, checkpoint_id, None))


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

    decline = sent.get(timeout=10)
    assert isinstance(decline, DeclineCheckpoint) and decline.checkpoint_id == 1
    assert decline.reason == "CHECKPOINT_ASYNC_EXCEPTION"
    assert "blocked" in decline.message  # names what it could not write, with the cause
    ack = sent.get(timeout=10)
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.checkpoint_id == 2
    assert ack.async_ms == 0.0  # durations come from the injected clock
    assert _fs.read_bytes(root.child("chk-2", "state")) == b"state"
    assert uploader.is_alive
    uploader.close()
