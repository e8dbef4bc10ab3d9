"""Both sides of checkpoints with shared files for the runtime tests, without a JobMaster:
a task's snapshot uploaded by the real uploader (`upload`), and what the JobMaster does with
the acknowledgement's shared files (`cluster/jobmaster/checkpoint_actions.py`) through the
real `FileSystemCheckpointStorage`, retaining one checkpoint (`RetainOne`)."""

from __future__ import annotations

import os
import queue

from barrierflow import _fs
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.checkpoint.subtask_state_file import (
    HeldSections,
    PendingStateFile,
    SubtaskStateReader,
)
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint


def upload(
    uploader: SnapshotUploader,
    sent: queue.SimpleQueue,
    job: _fs.Location,
    checkpoint_id: int,
    held: dict[str, HeldSections],
    final: bool = False,
) -> AcknowledgeCheckpoint:
    """Checkpoint `checkpoint_id` of subtask 0 of vertex 2 (key groups 0-127), holding
    `held` per operator, written by `uploader` into `job` (`final`: the job's final
    checkpoint): its acknowledgement."""
    location = job.child(f"chk-{checkpoint_id}", "2-0-d.state")
    pending = PendingStateFile(location, 2, 0, (0, 127), held, None, False, final)
    uploader.submit(
        Upload(checkpoint_id, pending, AcknowledgeCheckpoint(0, 1, checkpoint_id, None))
    )
    ack = sent.get(timeout=30)
    assert isinstance(ack, AcknowledgeCheckpoint) and ack.checkpoint_id == checkpoint_id
    return ack


class RetainOne:
    """A job folder under `root` whose driver retains the last completed checkpoint."""

    def __init__(self, root: str) -> None:
        self.storage = FileSystemCheckpointStorage(root, "job")
        self.job: _fs.Location = self.storage.job_dir
        self.retained: int | None = None

    def declined(self, ack: AcknowledgeCheckpoint) -> None:
        """The checkpoint failed: its new shared files go unless a retained one needs them."""
        self.storage.discard_new_shared([name for name, _, new in ack.shared_files if new])

    def completed(self, ack: AcknowledgeCheckpoint) -> None:
        """The checkpoint completed: count its shared files, discard the one retained before
        (its folder, then the shared files only it needed)."""
        listed = [[name, size] for name, size, _ in ack.shared_files]
        self.storage.register_completed(ack.checkpoint_id, {"shared_files": listed})
        if self.retained is not None:
            self.storage.discard(self.retained)
        self.retained = ack.checkpoint_id

    def read_section(
        self, ack: AcknowledgeCheckpoint, section: tuple[int, int] | None
    ) -> tuple[bytes, _fs.Location]:
        """A `section` (offset, length) of the state file the retained checkpoint's `ack`
        names, and that checkpoint's folder, which changelog files resolve against."""
        assert ack.checkpoint_id == self.retained and ack.state_handle is not None
        assert section is not None
        chk = self.job.child(f"chk-{ack.checkpoint_id}")
        file = chk.child(ack.state_handle.file).uri
        return SubtaskStateReader().slice(file, *section), chk

    def shared_on_disk(self) -> set[str]:
        """The files in the job's shared/, as names relative to the job folder."""
        return {f"shared/{name}" for name in os.listdir(self.job.path + "/shared")}
