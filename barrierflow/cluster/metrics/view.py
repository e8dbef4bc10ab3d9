"""The published metrics of a running job: immutable snapshots the REST threads read.

The JobMaster's `MetricsStore` (metrics_store.py) builds a `MetricsSnapshot` from the
tasks' reports and replaces it, never mutates it, so HTTP threads (the JSON routes, the
Prometheus collector, a dashboard) read it without locks. Rates are per second between
a subtask's two latest reports of one attempt (None until there are two); totals are
those of the current attempt (they start again at 0 after a restart, as Flink's do).
Checkpoint figures are not here: they are in the JobView's checkpoint statistics.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "HistoryPoint",
    "LatencyView",
    "MetricsSnapshot",
    "OperatorMetricsView",
    "SubtaskMetricsView",
    "UserMetricView",
    "VertexMetricsView",
]


@dataclass(frozen=True)
class UserMetricView:
    """One metric a user function registered (core/metrics.py)."""

    name: str
    kind: str
    """"counter", "gauge", "meter" or "distribution"."""
    value: float
    """A counter's or meter's total, a gauge's value, a distribution's count."""
    rate: float | None = None
    """A meter's events per second (None for other kinds, or before two reports)."""
    distribution: tuple[float, ...] | None = None
    """A distribution's (count, sum, min, max, p50, p95, p99)."""


@dataclass(frozen=True)
class LatencyView:
    """How old the latency markers of one source vertex were when they reached an operator
    (ms; the percentiles over the most recent markers, count and max over all)."""

    source_vertex_id: int
    count: int
    p50: float
    p95: float
    p99: float
    max: float
    min: float = 0.0
    sum: float = 0.0


@dataclass(frozen=True)
class OperatorMetricsView:
    """One operator of one subtask."""

    uid: str
    name: str
    records_in: int
    records_out: int
    records_in_per_second: float | None
    records_out_per_second: float | None
    watermark: int | None
    """The current input watermark (a source's: its output watermark); None before one."""
    watermark_lag_ms: float | None
    """The task's wall clock at its report minus `watermark`; None without a watermark or
    once it reached the end (MAX_WATERMARK)."""
    user: tuple[UserMetricView, ...] = ()
    latency: tuple[LatencyView, ...] = ()
    """Per source vertex (by id), with latency tracking on; empty otherwise."""


@dataclass(frozen=True)
class SubtaskMetricsView:
    """One subtask, as its latest report (and the one before) tell."""

    vertex_id: int
    subtask_index: int
    attempt: int
    time_ms: int
    """When the task read these values (its wall clock)."""
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    records_in_per_second: float | None
    records_out_per_second: float | None
    bytes_in_per_second: float | None
    bytes_out_per_second: float | None
    busy_ms_per_second: float | None
    idle_ms_per_second: float | None
    backpressured_ms_per_second: float | None
    """Time blocked on credit per second of the mailbox loop (0..1000)."""
    operators: tuple[OperatorMetricsView, ...] = ()

    @property
    def watermark(self) -> int | None:
        """The head operator's watermark (the subtask's input watermark)."""
        return self.operators[0].watermark if self.operators else None

    @property
    def watermark_lag_ms(self) -> float | None:
        return self.operators[0].watermark_lag_ms if self.operators else None


@dataclass(frozen=True)
class VertexMetricsView:
    """A vertex over its subtasks that reported: sums of rates and totals, the worst busy
    and backpressured time, the lowest watermark (with its lag)."""

    vertex_id: int
    name: str
    parallelism: int
    reporting: int
    """How many of its subtasks reported in the current attempt."""
    records_in: int = 0
    records_out: int = 0
    records_in_per_second: float | None = None
    records_out_per_second: float | None = None
    bytes_in_per_second: float | None = None
    bytes_out_per_second: float | None = None
    busy_ms_per_second: float | None = None
    """The busiest subtask's."""
    idle_ms_per_second: float | None = None
    """The least idle subtask's."""
    backpressured_ms_per_second: float | None = None
    """The most backpressured subtask's."""
    watermark: int | None = None
    """The lowest input watermark over its subtasks (None until every one has one)."""
    watermark_lag_ms: float | None = None


@dataclass(frozen=True)
class HistoryPoint:
    """A vertex's figures at one moment, for charts (one point per history resolution)."""

    time_ms: int
    records_in_per_second: float | None
    records_out_per_second: float | None
    backpressured_ms_per_second: float | None
    busy_ms_per_second: float | None
    watermark_lag_ms: float | None


@dataclass(frozen=True)
class MetricsSnapshot:
    """Everything the store knew at `time_ms`; replaced, never mutated."""

    time_ms: int
    attempt: int
    restarts: int
    """Restarts of the job so far (attempts after the first)."""
    vertices: tuple[VertexMetricsView, ...] = ()
    subtasks: tuple[SubtaskMetricsView, ...] = ()
    history: dict[int, tuple[HistoryPoint, ...]] = field(default_factory=dict)
    """By vertex id, oldest first, within the store's history window."""

    def vertex(self, vertex_id: int) -> VertexMetricsView | None:
        for vertex in self.vertices:
            if vertex.vertex_id == vertex_id:
                return vertex
        return None

    def subtasks_of(self, vertex_id: int) -> tuple[SubtaskMetricsView, ...]:
        """The vertex's subtasks that reported, by index."""
        return tuple(s for s in self.subtasks if s.vertex_id == vertex_id)
