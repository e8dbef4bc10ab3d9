"""Summaries over completed checkpoints: min/avg/max over all, nearest-rank percentiles over
a window (Flink's `CompletedCheckpointStatsSummary`)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from barrierflow.checkpoint.stats.values import CheckpointStats

__all__ = [
    "SUMMARY_FIGURES",
    "CompletedCheckpointStatsSummary",
    "StatsSummary",
    "SummaryAccumulator",
    "nearest_rank",
]

SUMMARY_FIGURES: dict[str, Callable[[CheckpointStats], float]] = {
    "end_to_end_duration": lambda c: c.end_to_end_duration_ms,
    "duration": lambda c: c.duration_ms,
    "state_size": lambda c: c.state_bytes,
    "checkpointed_size": lambda c: c.checkpointed_bytes,
    "persisted_data": lambda c: c.persisted_bytes,
    "sync_duration": lambda c: c.max_sync_ms,
    "async_duration": lambda c: c.max_async_ms,
    "alignment_duration": lambda c: c.max_alignment_ms,
    "start_delay": lambda c: c.max_start_delay_ms,
}
"""What the summary covers, each figure of one completed checkpoint (maxima over subtasks)."""


@dataclass(frozen=True)
class StatsSummary:
    """min/avg/max over every value, p50/p99 (nearest rank) over the last window of them."""

    count: int = 0
    min: float | None = None
    max: float | None = None
    avg: float | None = None
    p50: float | None = None
    p99: float | None = None


@dataclass(frozen=True)
class CompletedCheckpointStatsSummary:
    """Summaries over completed checkpoints (Flink's `CompletedCheckpointStatsSummary`);
    a figure with no value yet reads as an empty `StatsSummary`, not zeros."""

    figures: dict[str, StatsSummary] = field(default_factory=dict)

    def __getitem__(self, name: str) -> StatsSummary:
        return self.figures.get(name, StatsSummary())


class SummaryAccumulator:
    """Running min/max/sum/count, plus a bounded window for percentiles.

    >>> acc = SummaryAccumulator(window=2)
    >>> for value in (900, 100, 300):
    ...     acc.add(value)
    >>> acc.summary()
    StatsSummary(count=3, min=100, max=900, avg=433.3333333333333, p50=100, p99=300)
    """

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
            p50=nearest_rank(ordered, 50),
            p99=nearest_rank(ordered, 99),
        )


def nearest_rank(ordered: Sequence[float], percent: float) -> float:
    """The smallest value with at least `percent`% of the values at or below it.

    >>> nearest_rank([100, 200, 300, 400], 50), nearest_rank([100, 200, 300, 400], 99)
    (200, 400)
    """
    return ordered[max(1, math.ceil(percent / 100 * len(ordered))) - 1]
