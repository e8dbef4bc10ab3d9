"""The checkpoint statistics tracker: reports in, immutable snapshots out (Flink's
`CheckpointStatsTracker` and `CheckpointStatsSnapshot`), as pure logic.

The JobMaster reports what the coordinator decided and what the tasks measured;
every report takes its time as a parameter, so tests drive the tracker event by
event. The values are in `values`, the summaries in `summary`; the REST shapes of a
snapshot live next to the REST server (`barrierflow.cluster.rest.bodies`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.stats.summary import (
    SUMMARY_FIGURES,
    CompletedCheckpointStatsSummary,
    SummaryAccumulator,
)
from barrierflow.checkpoint.stats.values import (
    CheckpointStats,
    CheckpointStatsCounts,
    CheckpointStatsStatus,
    RestoredCheckpointStats,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.checkpoint.stats.wording import failure_message
from barrierflow.errors import IllegalCheckpointStatsTransitionError

__all__ = [
    "DEFAULT_HISTORY_SIZE",
    "DEFAULT_SUMMARY_WINDOW",
    "CheckpointStatsSnapshot",
    "CheckpointStatsTracker",
    "IllegalCheckpointStatsTransitionError",
]

DEFAULT_HISTORY_SIZE = 100
"""How many checkpoints the tracker keeps in its history (Flink's `web.checkpoints.history`)."""
DEFAULT_SUMMARY_WINDOW = 1000
"""Percentiles are taken over the last this many completed checkpoints (min/avg/max over all)."""


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
        self._summaries = {name: SummaryAccumulator(summary_window) for name in SUMMARY_FIGURES}
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
        for name, figure in SUMMARY_FIGURES.items():
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
        stats = replace(
            stats, failure_reason=reason, failure_message=failure_message(stats, reason)
        )
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
