"""The values of checkpoint statistics: one checkpoint, one subtask's part in it, counts.

Immutable, so a snapshot never changes under a reader on another thread. Derived
figures (durations, sizes, maxima over subtasks) are computed from the recorded
times and sizes, never stored. What is measured, per subtask (by the task, sent
with its acknowledgement):

- start delay: from the trigger to the subtask receiving its first barrier;
- alignment: from the first to the last barrier of the checkpoint at its inputs;
- synchronous part: snapshotting the operators (state is copied);
- asynchronous part: writing the state file;
- state bytes, and persisted in-flight bytes (unaligned checkpoints; 0 when aligned).

And per checkpoint (by the JobMaster): the trigger time, the time of each
acknowledgement, the end-to-end duration (trigger to the last acknowledgement, as
Flink reports it), the completion time (after `_metadata` was written), the final
status and, for a failed one, the reason and which subtask declined or was missing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.stats import wording

__all__ = [
    "CheckpointStats",
    "CheckpointStatsCounts",
    "CheckpointStatsStatus",
    "RestoredCheckpointStats",
    "SubtaskCheckpointStats",
    "SubtaskDecline",
    "TaskVertexInfo",
]


class CheckpointStatsStatus(enum.Enum):
    """Where a checkpoint is; COMPLETED and FAILED are final (Flink's `CheckpointStatsStatus`)."""

    IN_PROGRESS = "triggered; neither completed nor failed yet"
    COMPLETED = "every subtask acknowledged and `_metadata` was written"
    FAILED = "aborted: declined, expired, subsumed, not finalized, or dropped on failover"


@dataclass(frozen=True)
class TaskVertexInfo:
    """A vertex of the job graph as the statistics name it."""

    vertex_id: int
    name: str
    parallelism: int

    def task_name(self, subtask_index: int) -> str:
        """How logs and errors name one subtask: `'Map' (2/4)`."""
        return f"'{self.name}' ({subtask_index + 1}/{self.parallelism})"


@dataclass(frozen=True)
class SubtaskCheckpointStats:
    """One subtask's acknowledgement of one checkpoint (Flink's `SubtaskStateStats`)."""

    vertex_id: int
    subtask_index: int
    ack_timestamp_ms: int
    """When the JobMaster received the acknowledgement."""
    sync_ms: float = 0.0
    async_ms: float = 0.0
    alignment_ms: float = 0.0
    start_delay_ms: float = 0.0
    state_bytes: int = 0
    """The subtask's whole state: its state file and every shared file it references."""
    persisted_bytes: int = 0
    """In-flight data written with the snapshot (unaligned checkpoints)."""
    unaligned: bool = False
    checkpointed_bytes: int | None = None
    """Uploaded for this checkpoint (incremental: the state file and the new shared files);
    None: all of `state_bytes` (full checkpoints, savepoints)."""

    @property
    def uploaded_bytes(self) -> int:
        """Flink's checkpointed size of this subtask."""
        return self.state_bytes if self.checkpointed_bytes is None else self.checkpointed_bytes


@dataclass(frozen=True)
class SubtaskDecline:
    """One subtask declined one checkpoint."""

    vertex_id: int
    subtask_index: int
    timestamp_ms: int
    reason: CheckpointFailureReason
    message: str = ""


@dataclass(frozen=True)
class CheckpointStats:
    """One checkpoint, in any status; immutable (a snapshot never changes under a reader).

    `end_to_end_duration_ms` is Flink's: trigger to the last acknowledgement (to the
    failure for a failed one). `duration_ms` runs to the end: to the completion
    (`_metadata` written) or the failure. The `max_*` figures are over subtasks.
    """

    checkpoint_id: int
    status: CheckpointStatsStatus
    trigger_ms: int
    vertices: tuple[TaskVertexInfo, ...]
    acknowledged: tuple[SubtaskCheckpointStats, ...] = ()
    """In the order the acknowledgements arrived."""
    declines: tuple[SubtaskDecline, ...] = ()
    is_savepoint: bool = False
    is_final: bool = False
    completion_ms: int | None = None
    failure_ms: int | None = None
    failure_reason: CheckpointFailureReason | None = None
    failure_message: str | None = None
    external_path: str | None = None
    """The checkpoint's folder, once completed."""

    @property
    def num_subtasks(self) -> int:
        return sum(v.parallelism for v in self.vertices)

    @property
    def num_acknowledged(self) -> int:
        return len(self.acknowledged)

    @property
    def latest_ack_ms(self) -> int | None:
        return max((a.ack_timestamp_ms for a in self.acknowledged), default=None)

    @property
    def end_to_end_duration_ms(self) -> int:
        if self.status is CheckpointStatsStatus.FAILED and self.failure_ms is not None:
            return self.failure_ms - self.trigger_ms
        latest = self.latest_ack_ms
        return 0 if latest is None else latest - self.trigger_ms

    @property
    def duration_ms(self) -> int:
        if self.completion_ms is not None:
            return self.completion_ms - self.trigger_ms
        return self.end_to_end_duration_ms

    @property
    def state_bytes(self) -> int:
        return sum(a.state_bytes for a in self.acknowledged)

    @property
    def checkpointed_bytes(self) -> int:
        """Uploaded for this checkpoint (Flink's checkpointed size): `state_bytes` for full
        checkpoints, less for incremental ones (files earlier checkpoints uploaded)."""
        return sum(a.uploaded_bytes for a in self.acknowledged)

    @property
    def persisted_bytes(self) -> int:
        return sum(a.persisted_bytes for a in self.acknowledged)

    @property
    def max_sync_ms(self) -> float:
        return max((a.sync_ms for a in self.acknowledged), default=0.0)

    @property
    def max_async_ms(self) -> float:
        return max((a.async_ms for a in self.acknowledged), default=0.0)

    @property
    def max_alignment_ms(self) -> float:
        return max((a.alignment_ms for a in self.acknowledged), default=0.0)

    @property
    def max_start_delay_ms(self) -> float:
        return max((a.start_delay_ms for a in self.acknowledged), default=0.0)

    @property
    def kind(self) -> str:
        """`savepoint`, `final checkpoint` or `checkpoint`, as logs name it."""
        if self.is_savepoint:
            return "savepoint"
        return "final checkpoint" if self.is_final else "checkpoint"

    def vertex(self, vertex_id: int) -> TaskVertexInfo:
        for vertex in self.vertices:
            if vertex.vertex_id == vertex_id:
                return vertex
        raise KeyError(f"checkpoint {self.checkpoint_id} has no vertex {vertex_id}")

    def subtask_results(
        self, vertex: TaskVertexInfo
    ) -> list[SubtaskCheckpointStats | SubtaskDecline | None]:
        """Per subtask of `vertex`, in index order: its acknowledgement, its decline, or None
        (not heard from: pending, or never answered)."""
        acks = {a.subtask_index: a for a in self.acknowledged if a.vertex_id == vertex.vertex_id}
        declines = {d.subtask_index: d for d in self.declines if d.vertex_id == vertex.vertex_id}
        return [acks.get(i) or declines.get(i) for i in range(vertex.parallelism)]

    def missing_subtasks(self) -> list[tuple[TaskVertexInfo, int]]:
        """Subtasks that neither acknowledged nor declined, in graph order."""
        heard = {(a.vertex_id, a.subtask_index) for a in self.acknowledged}
        heard |= {(d.vertex_id, d.subtask_index) for d in self.declines}
        return [
            (v, i)
            for v in self.vertices
            for i in range(v.parallelism)
            if (v.vertex_id, i) not in heard
        ]

    def describe(self) -> str:
        """The one log line of this checkpoint (see `wording.describe`)."""
        return wording.describe(self)


@dataclass(frozen=True)
class RestoredCheckpointStats:
    """The checkpoint an attempt restored from (Flink's `RestoredCheckpointStats`)."""

    checkpoint_id: int
    restore_ms: int
    external_path: str
    is_savepoint: bool = False


@dataclass(frozen=True)
class CheckpointStatsCounts:
    """How many checkpoints did what (Flink's `CheckpointStatsCounts`)."""

    restored: int = 0
    triggered: int = 0
    """Flink's `total`: every checkpoint and savepoint triggered."""
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
