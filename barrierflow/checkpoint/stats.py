"""Checkpoint statistics: what every checkpoint, and every subtask in it, took and wrote.

Flink's `CheckpointStatsTracker` and `CheckpointStatsSnapshot`, as pure logic. The
JobMaster reports what the coordinator decided and what the tasks measured; every
report takes its time as a parameter, so tests drive the tracker event by event.
`snapshot()` returns an immutable view whose `to_json()` has the shape of Flink's
REST `/jobs/<id>/checkpoints` (counts, summary, latest, history), and each
`CheckpointStats.to_json(details=True)` the shape of `/checkpoints/details/<id>`.

What is measured, per subtask (by the task, sent with its acknowledgement):

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
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.errors import BarrierflowError

__all__ = [
    "DEFAULT_HISTORY_SIZE",
    "DEFAULT_SUMMARY_WINDOW",
    "CheckpointStats",
    "CheckpointStatsCounts",
    "CheckpointStatsSnapshot",
    "CheckpointStatsStatus",
    "CheckpointStatsTracker",
    "CompletedCheckpointStatsSummary",
    "IllegalCheckpointStatsTransitionError",
    "RestoredCheckpointStats",
    "StatsSummary",
    "SubtaskCheckpointStats",
    "SubtaskDecline",
    "TaskVertexInfo",
    "format_bytes",
]

DEFAULT_HISTORY_SIZE = 100
"""How many checkpoints the tracker keeps in its history (Flink's `web.checkpoints.history`)."""
DEFAULT_SUMMARY_WINDOW = 1000
"""Percentiles are taken over the last this many completed checkpoints (min/avg/max over all)."""


class IllegalCheckpointStatsTransitionError(BarrierflowError):
    """A checkpoint's statistics were asked to move to a status they cannot reach."""


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
    persisted_bytes: int = 0
    """In-flight data written with the snapshot (unaligned checkpoints)."""
    unaligned: bool = False


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

    # ---- derived figures -------------------------------------------------------------------

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
        """The one log line of a finished checkpoint."""
        if self.status is CheckpointStatsStatus.FAILED:
            return (
                f"{self.kind} {self.checkpoint_id} failed after {self.duration_ms} ms: "
                f"{self.failure_message}"
            )
        head = f"{self.kind} {self.checkpoint_id}"
        if self.status is CheckpointStatsStatus.IN_PROGRESS:
            head += (
                f" in progress for {self.end_to_end_duration_ms} ms "
                f"({self.num_acknowledged} of {self.num_subtasks} acknowledged)"
            )
        else:
            head += (
                f" completed in {self.duration_ms} ms "
                f"(last acknowledgement after {self.end_to_end_duration_ms} ms)"
            )
        return (
            f"{head}, {format_bytes(self.state_bytes)} state, "
            f"sync max {self.max_sync_ms:.0f} ms, async max {self.max_async_ms:.0f} ms, "
            f"alignment max {self.max_alignment_ms:.0f} ms, "
            f"start delay max {self.max_start_delay_ms:.0f} ms"
        )

    # ---- JSON --------------------------------------------------------------------------------

    def to_json(self, *, details: bool = False) -> dict[str, Any]:
        """Flink's `CheckpointStatistics`; with `details`, every vertex and subtask too."""
        result: dict[str, Any] = {
            "id": self.checkpoint_id,
            "status": self.status.name,
            "is_savepoint": self.is_savepoint,
            "is_final": self.is_final,
            "checkpoint_type": "SAVEPOINT" if self.is_savepoint else "CHECKPOINT",
            "trigger_timestamp": self.trigger_ms,
            "latest_ack_timestamp": self.latest_ack_ms,
            "completion_timestamp": self.completion_ms,
            "end_to_end_duration": self.end_to_end_duration_ms,
            "duration": self.duration_ms,
            "state_size": self.state_bytes,
            "persisted_data": self.persisted_bytes,
            "sync_duration_max": self.max_sync_ms,
            "async_duration_max": self.max_async_ms,
            "alignment_duration_max": self.max_alignment_ms,
            "start_delay_max": self.max_start_delay_ms,
            "num_subtasks": self.num_subtasks,
            "num_acknowledged_subtasks": self.num_acknowledged,
            "external_path": self.external_path,
            "failure_timestamp": self.failure_ms,
            "failure_reason": None if self.failure_reason is None else self.failure_reason.name,
            "failure_message": self.failure_message,
        }
        if details:
            result["tasks"] = {str(v.vertex_id): self._vertex_json(v) for v in self.vertices}
        return result

    def _vertex_json(self, vertex: TaskVertexInfo) -> dict[str, Any]:
        acks = {a.subtask_index: a for a in self.acknowledged if a.vertex_id == vertex.vertex_id}
        declines = {d.subtask_index: d for d in self.declines if d.vertex_id == vertex.vertex_id}
        latest = max((a.ack_timestamp_ms for a in acks.values()), default=None)
        return {
            "id": vertex.vertex_id,
            "name": vertex.name,
            "parallelism": vertex.parallelism,
            "status": self.status.name,
            "latest_ack_timestamp": latest,
            "end_to_end_duration": None if latest is None else latest - self.trigger_ms,
            "state_size": sum(a.state_bytes for a in acks.values()),
            "persisted_data": sum(a.persisted_bytes for a in acks.values()),
            "num_subtasks": vertex.parallelism,
            "num_acknowledged_subtasks": len(acks),
            "subtasks": [
                self._subtask_json(index, acks.get(index), declines.get(index))
                for index in range(vertex.parallelism)
            ],
        }

    def _subtask_json(
        self, index: int, ack: SubtaskCheckpointStats | None, decline: SubtaskDecline | None
    ) -> dict[str, Any]:
        if ack is not None:
            return {
                "index": index,
                "status": "completed",
                "ack_timestamp": ack.ack_timestamp_ms,
                "end_to_end_duration": ack.ack_timestamp_ms - self.trigger_ms,
                "state_size": ack.state_bytes,
                "checkpoint": {"sync": ack.sync_ms, "async": ack.async_ms},
                "alignment": {"duration": ack.alignment_ms, "persisted": ack.persisted_bytes},
                "start_delay": ack.start_delay_ms,
                "unaligned_checkpoint": ack.unaligned,
            }
        if decline is not None:
            return {
                "index": index,
                "status": "declined",
                "decline_timestamp": decline.timestamp_ms,
                "reason": decline.reason.name,
                "message": decline.message,
            }
        return {"index": index, "status": "pending_or_failed"}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckpointStats:
        """Inverse of `to_json(details=True)` (derived figures are recomputed)."""
        vertices, acks, declines = [], [], []
        for task in data["tasks"].values():
            vertex = TaskVertexInfo(task["id"], task["name"], task["parallelism"])
            vertices.append(vertex)
            for sub in task["subtasks"]:
                if sub["status"] == "completed":
                    acks.append(
                        SubtaskCheckpointStats(
                            vertex.vertex_id,
                            sub["index"],
                            sub["ack_timestamp"],
                            sync_ms=sub["checkpoint"]["sync"],
                            async_ms=sub["checkpoint"]["async"],
                            alignment_ms=sub["alignment"]["duration"],
                            start_delay_ms=sub["start_delay"],
                            state_bytes=sub["state_size"],
                            persisted_bytes=sub["alignment"]["persisted"],
                            unaligned=sub["unaligned_checkpoint"],
                        )
                    )
                elif sub["status"] == "declined":
                    declines.append(
                        SubtaskDecline(
                            vertex.vertex_id,
                            sub["index"],
                            sub["decline_timestamp"],
                            CheckpointFailureReason[sub["reason"]],
                            sub["message"],
                        )
                    )
        acks.sort(key=lambda a: (a.ack_timestamp_ms, a.vertex_id, a.subtask_index))
        reason = data["failure_reason"]
        return cls(
            checkpoint_id=data["id"],
            status=CheckpointStatsStatus[data["status"]],
            trigger_ms=data["trigger_timestamp"],
            vertices=tuple(vertices),
            acknowledged=tuple(acks),
            declines=tuple(declines),
            is_savepoint=data["is_savepoint"],
            is_final=data["is_final"],
            completion_ms=data["completion_timestamp"],
            failure_ms=data["failure_timestamp"],
            failure_reason=None if reason is None else CheckpointFailureReason[reason],
            failure_message=data["failure_message"],
            external_path=data["external_path"],
        )


@dataclass(frozen=True)
class RestoredCheckpointStats:
    """The checkpoint an attempt restored from (Flink's `RestoredCheckpointStats`)."""

    checkpoint_id: int
    restore_ms: int
    external_path: str
    is_savepoint: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.checkpoint_id,
            "restore_timestamp": self.restore_ms,
            "is_savepoint": self.is_savepoint,
            "external_path": self.external_path,
        }


@dataclass(frozen=True)
class CheckpointStatsCounts:
    """How many checkpoints did what (Flink's `CheckpointStatsCounts`)."""

    restored: int = 0
    triggered: int = 0
    """Flink's `total`: every checkpoint and savepoint triggered."""
    in_progress: int = 0
    completed: int = 0
    failed: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "restored": self.restored,
            "total": self.triggered,
            "in_progress": self.in_progress,
            "completed": self.completed,
            "failed": self.failed,
        }


@dataclass(frozen=True)
class StatsSummary:
    """min/avg/max over every value, p50/p99 (nearest rank) over the last window of them."""

    count: int = 0
    min: float | None = None
    max: float | None = None
    avg: float | None = None
    p50: float | None = None
    p99: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "min": self.min,
            "max": self.max,
            "avg": self.avg,
            "p50": self.p50,
            "p99": self.p99,
        }


class _SummaryAccumulator:
    """Running min/max/sum/count, plus a bounded window for percentiles."""

    def __init__(self, window: int) -> None:
        self.count = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None
        self.recent: deque[float] = deque(maxlen=window)

    def add(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.min = value if self.min is None else min(self.min, value)
        self.max = value if self.max is None else max(self.max, value)
        self.recent.append(value)

    def summary(self) -> StatsSummary:
        if self.count == 0:
            return StatsSummary()
        ordered = sorted(self.recent)
        return StatsSummary(
            count=self.count,
            min=self.min,
            max=self.max,
            avg=self.total / self.count,
            p50=_nearest_rank(ordered, 50),
            p99=_nearest_rank(ordered, 99),
        )


def _nearest_rank(ordered: Sequence[float], percent: float) -> float:
    """The smallest value with at least `percent`% of the values at or below it."""
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]


_SUMMARY_FIGURES: dict[str, Any] = {
    "end_to_end_duration": lambda c: c.end_to_end_duration_ms,
    "duration": lambda c: c.duration_ms,
    "state_size": lambda c: c.state_bytes,
    "persisted_data": lambda c: c.persisted_bytes,
    "sync_duration": lambda c: c.max_sync_ms,
    "async_duration": lambda c: c.max_async_ms,
    "alignment_duration": lambda c: c.max_alignment_ms,
    "start_delay": lambda c: c.max_start_delay_ms,
}
"""What the summary covers, each figure of one completed checkpoint (maxima over subtasks)."""


@dataclass(frozen=True)
class CompletedCheckpointStatsSummary:
    """Summaries over completed checkpoints (Flink's `CompletedCheckpointStatsSummary`)."""

    figures: dict[str, StatsSummary] = field(default_factory=dict)

    def __getitem__(self, name: str) -> StatsSummary:
        return self.figures.get(name, StatsSummary())

    def to_json(self) -> dict[str, Any]:
        return {name: self[name].to_json() for name in _SUMMARY_FIGURES}


@dataclass(frozen=True)
class CheckpointStatsSnapshot:
    """Everything the tracker knew at one moment; immutable, safe to hand to other threads."""

    counts: CheckpointStatsCounts
    summary: CompletedCheckpointStatsSummary
    history: tuple[CheckpointStats, ...]
    """Newest first: the checkpoints in progress and the last finished ones."""
    latest_completed: CheckpointStats | None = None
    latest_savepoint: CheckpointStats | None = None
    latest_failed: CheckpointStats | None = None
    latest_restored: RestoredCheckpointStats | None = None

    def checkpoint(self, checkpoint_id: int) -> CheckpointStats | None:
        """The statistics of a checkpoint still in the history, else None."""
        for stats in self.history:
            if stats.checkpoint_id == checkpoint_id:
                return stats
        return None

    def to_json(self) -> dict[str, Any]:
        """Flink's REST `/jobs/<id>/checkpoints`."""

        def entry(stats: CheckpointStats | None) -> dict[str, Any] | None:
            return None if stats is None else stats.to_json()

        return {
            "counts": self.counts.to_json(),
            "summary": self.summary.to_json(),
            "latest": {
                "completed": entry(self.latest_completed),
                "savepoint": entry(self.latest_savepoint),
                "failed": entry(self.latest_failed),
                "restored": (
                    None if self.latest_restored is None else self.latest_restored.to_json()
                ),
            },
            "history": [stats.to_json() for stats in self.history],
        }


class _InProgress:
    """The mutable record of one checkpoint in progress (the tracker's own)."""

    def __init__(self, checkpoint_id: int, trigger_ms: int, is_savepoint: bool, is_final: bool):
        self.checkpoint_id = checkpoint_id
        self.trigger_ms = trigger_ms
        self.is_savepoint = is_savepoint
        self.is_final = is_final
        self.acknowledged: dict[tuple[int, int], SubtaskCheckpointStats] = {}
        self.declines: dict[tuple[int, int], SubtaskDecline] = {}


class CheckpointStatsTracker:
    """Flink's checkpoint statistics tracker. JobMaster thread only; owns no clock.

    Guarantees that a checkpoint ends once, COMPLETED or FAILED, and that triggered ids
    increase (any other move raises `IllegalCheckpointStatsTransitionError`), and that
    snapshots are immutable. Assumes the JobMaster reports a trigger before anything
    else about a checkpoint;
    acknowledgements and declines of a checkpoint that is not in progress (late, or
    duplicates) are ignored, as Flink ignores them, and `report_*` return False then.

    >>> tracker = CheckpointStatsTracker([TaskVertexInfo(0, "Source", 1),
    ...                                   TaskVertexInfo(1, "Sink", 2)])
    >>> tracker.report_triggered(1, trigger_ms=1_000)
    >>> for index, (ack_ms, state_bytes) in enumerate([(1_020, 100), (1_050, 300)]):
    ...     _ = tracker.report_acknowledged(1, SubtaskCheckpointStats(
    ...         1, index, ack_ms, sync_ms=2.0, async_ms=9.0, state_bytes=state_bytes))
    >>> tracker.report_acknowledged(1, SubtaskCheckpointStats(0, 0, 1_010, state_bytes=50))
    True
    >>> tracker.report_completed(1, completion_ms=1_055, external_path="/chk/job/chk-1").describe()
    'checkpoint 1 completed in 55 ms (last acknowledgement after 50 ms), 450 B state, sync \
max 2 ms, async max 9 ms, alignment max 0 ms, start delay max 0 ms'
    >>> tracker.report_triggered(2, trigger_ms=2_000)
    >>> tracker.report_failed(2, 2_700, CheckpointFailureReason.CHECKPOINT_EXPIRED).describe()
    "checkpoint 2 failed after 700 ms: the checkpoint timed out before all tasks acknowledged \
(0 of 3 subtasks acknowledged; missing 'Source' (1/1), 'Sink' (1/2), 'Sink' (2/2))"
    >>> tracker.snapshot().counts
    CheckpointStatsCounts(restored=0, triggered=2, in_progress=0, completed=1, failed=1)
    """

    def __init__(
        self,
        vertices: Iterable[TaskVertexInfo],
        *,
        history_size: int = DEFAULT_HISTORY_SIZE,
        summary_window: int = DEFAULT_SUMMARY_WINDOW,
    ) -> None:
        if history_size < 1 or summary_window < 1:
            raise ValueError("history_size and summary_window must be >= 1")
        self.vertices = tuple(vertices)
        self._vertex_ids = {v.vertex_id: v for v in self.vertices}
        self._in_progress: dict[int, _InProgress] = {}
        self._finished: deque[CheckpointStats] = deque(maxlen=history_size)
        self._summaries = {name: _SummaryAccumulator(summary_window) for name in _SUMMARY_FIGURES}
        self._summary: CompletedCheckpointStatsSummary | None = CompletedCheckpointStatsSummary()
        self._triggered = 0
        self._highest_triggered: int | None = None
        self._completed = 0
        self._failed = 0
        self._restored = 0
        self._latest_completed: CheckpointStats | None = None
        self._latest_savepoint: CheckpointStats | None = None
        self._latest_failed: CheckpointStats | None = None
        self._latest_restored: RestoredCheckpointStats | None = None

    # ---- reports -------------------------------------------------------------------------------

    def report_restored(
        self, checkpoint_id: int, restore_ms: int, *, external_path: str, is_savepoint: bool = False
    ) -> RestoredCheckpointStats:
        """An attempt restored its state from this checkpoint (counts every restore)."""
        restored = RestoredCheckpointStats(checkpoint_id, restore_ms, external_path, is_savepoint)
        self._restored += 1
        self._latest_restored = restored
        return restored

    def report_triggered(
        self,
        checkpoint_id: int,
        trigger_ms: int,
        *,
        is_savepoint: bool = False,
        is_final: bool = False,
    ) -> None:
        """The coordinator triggered this checkpoint at `trigger_ms`; it is IN_PROGRESS."""
        if self._highest_triggered is not None and checkpoint_id <= self._highest_triggered:
            raise IllegalCheckpointStatsTransitionError(
                f"checkpoint {checkpoint_id} cannot be triggered: ids must increase, and "
                f"{self._highest_triggered} was triggered already"
            )
        self._in_progress[checkpoint_id] = _InProgress(
            checkpoint_id, trigger_ms, is_savepoint, is_final
        )
        self._triggered += 1
        self._highest_triggered = checkpoint_id

    def report_acknowledged(self, checkpoint_id: int, stats: SubtaskCheckpointStats) -> bool:
        """A subtask acknowledged; False (ignored) unless in progress and its first word."""
        record = self._in_progress.get(checkpoint_id)
        key = (stats.vertex_id, stats.subtask_index)
        if record is None or key in record.acknowledged or key in record.declines:
            return False
        self._check_subtask(*key)
        record.acknowledged[key] = stats
        return True

    def report_declined(self, checkpoint_id: int, decline: SubtaskDecline) -> bool:
        """A subtask declined; its reason and message go into the failure message."""
        record = self._in_progress.get(checkpoint_id)
        key = (decline.vertex_id, decline.subtask_index)
        if record is None or key in record.acknowledged or key in record.declines:
            return False
        self._check_subtask(*key)
        record.declines[key] = decline
        return True

    def report_completed(
        self, checkpoint_id: int, completion_ms: int, *, external_path: str
    ) -> CheckpointStats:
        """`_metadata` was written at `completion_ms`: the checkpoint is COMPLETED."""
        record = self._take(checkpoint_id, "completed")
        stats = self._freeze(
            record,
            CheckpointStatsStatus.COMPLETED,
            completion_ms=completion_ms,
            external_path=external_path,
        )
        self._completed += 1
        for name, figure in _SUMMARY_FIGURES.items():
            self._summaries[name].add(figure(stats))
        self._summary = None
        if stats.is_savepoint:
            self._latest_savepoint = stats
        else:
            self._latest_completed = stats
        self._end(stats)
        return stats

    def report_failed(
        self, checkpoint_id: int, failure_ms: int, reason: CheckpointFailureReason
    ) -> CheckpointStats:
        """The coordinator aborted the checkpoint for `reason`: it is FAILED."""
        record = self._take(checkpoint_id, "failed")
        stats = self._freeze(record, CheckpointStatsStatus.FAILED, failure_ms=failure_ms)
        stats = _with_failure(stats, reason)
        self._failed += 1
        self._latest_failed = stats
        self._end(stats)
        return stats

    # ---- views ---------------------------------------------------------------------------------

    @property
    def in_progress_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._in_progress))

    @property
    def highest_triggered_id(self) -> int | None:
        """The largest checkpoint id ever triggered; the next one must be larger."""
        return self._highest_triggered

    def snapshot(self) -> CheckpointStatsSnapshot:
        """An immutable view of everything tracked so far."""
        if self._summary is None:
            self._summary = CompletedCheckpointStatsSummary(
                {name: acc.summary() for name, acc in self._summaries.items()}
            )
        in_progress = [
            self._freeze(r, CheckpointStatsStatus.IN_PROGRESS) for r in self._in_progress.values()
        ]
        history = sorted(
            [*in_progress, *self._finished], key=lambda s: s.checkpoint_id, reverse=True
        )
        return CheckpointStatsSnapshot(
            counts=CheckpointStatsCounts(
                restored=self._restored,
                triggered=self._triggered,
                in_progress=len(self._in_progress),
                completed=self._completed,
                failed=self._failed,
            ),
            summary=self._summary,
            history=tuple(history),
            latest_completed=self._latest_completed,
            latest_savepoint=self._latest_savepoint,
            latest_failed=self._latest_failed,
            latest_restored=self._latest_restored,
        )

    # ---- internals -----------------------------------------------------------------------------

    def _check_subtask(self, vertex_id: int, subtask_index: int) -> None:
        vertex = self._vertex_ids.get(vertex_id)
        if vertex is None or not 0 <= subtask_index < vertex.parallelism:
            raise ValueError(f"no subtask {subtask_index} of vertex {vertex_id} in this job")

    def _take(self, checkpoint_id: int, what: str) -> _InProgress:
        record = self._in_progress.pop(checkpoint_id, None)
        if record is None:
            highest = self._highest_triggered
            ended = highest is not None and checkpoint_id <= highest
            state = "already ended" if ended else "was never triggered"
            raise IllegalCheckpointStatsTransitionError(
                f"checkpoint {checkpoint_id} cannot be reported {what}: it {state}"
            )
        return record

    def _end(self, stats: CheckpointStats) -> None:
        self._finished.append(stats)

    def _freeze(
        self, record: _InProgress, status: CheckpointStatsStatus, **ending: Any
    ) -> CheckpointStats:
        return CheckpointStats(
            checkpoint_id=record.checkpoint_id,
            status=status,
            trigger_ms=record.trigger_ms,
            vertices=self.vertices,
            acknowledged=tuple(record.acknowledged.values()),
            declines=tuple(record.declines.values()),
            is_savepoint=record.is_savepoint,
            is_final=record.is_final,
            **ending,
        )


def _with_failure(stats: CheckpointStats, reason: CheckpointFailureReason) -> CheckpointStats:
    """Add the reason and a message naming the subtask that declined or those missing."""
    message = reason.value
    if stats.declines:
        first = min(stats.declines, key=lambda d: d.timestamp_ms)
        task = stats.vertex(first.vertex_id).task_name(first.subtask_index)
        said = first.message or (first.reason.value if first.reason is not reason else "")
        message += f": {task} declined" + (f": {said}" if said else "")
    else:
        missing = stats.missing_subtasks()
        if missing and reason is not CheckpointFailureReason.CHECKPOINT_SUBSUMED:
            names = ", ".join(v.task_name(i) for v, i in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            message += (
                f" ({stats.num_acknowledged} of {stats.num_subtasks} subtasks acknowledged; "
                f"missing {names}{more})"
            )
    return replace(stats, failure_reason=reason, failure_message=message)


def format_bytes(size: float) -> str:
    """A byte count as people read it.

    >>> format_bytes(450), format_bytes(1_258_291), format_bytes(3 * 2**30)
    ('450 B', '1.2 MiB', '3.0 GiB')
    """
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.1f} {unit}"
