"""MetricsStore: the JobMaster's latest metrics of every task, their rates, and their history.

JobMaster thread only. Each `TaskMetricsReport` (cumulative totals, runtime/metrics)
replaces its subtask's entry; rates come from it and the subtask's previous report of
the same attempt (none across a restart, where totals start again, nor when a total went
down). `publish` builds an immutable `MetricsSnapshot` (metrics_view.py) for other threads,
with per-vertex aggregates and, at most once per HISTORY_RESOLUTION_MS, one history point
per vertex, kept for HISTORY_WINDOW_MS. Reports publish at most every PUBLISH_INTERVAL_MS;
the attempt's tick publishes what is left (`publish_if_due`).

>>> from barrierflow._clock import ManualClock
>>> from barrierflow.graph.job_graph import SubtaskId
>>> from barrierflow.runtime.task_messages import TaskMetricsReport
>>> store = MetricsStore([(0, "Source", 1)], ManualClock())
>>> def report(t, n):
...     ops = [{"uid": "s", "name": "Source", "records_in": 0, "records_out": n,
...             "watermark": None, "user": []}]
...     return TaskMetricsReport(0, 0, t, {"records_in": 0, "records_out": n, "bytes_in": 0,
...         "bytes_out": 0, "busy_ms": 0, "idle_ms": 0, "backpressured_ms": 0, "operators": ops})
>>> store.report(SubtaskId(0, 0), report(1_000, 100))
>>> store.report(SubtaskId(0, 0), report(3_000, 500))
>>> store.publish().vertex(0).records_out_per_second
200.0
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from barrierflow._clock import Clock
from barrierflow.cluster.metrics.view import (
    HistoryPoint,
    LatencyView,
    MetricsSnapshot,
    OperatorMetricsView,
    SubtaskMetricsView,
    UserMetricView,
    VertexMetricsView,
)
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime.elements import MAX_WATERMARK
from barrierflow.runtime.task_messages import TaskMetricsReport

__all__ = [
    "HISTORY_RESOLUTION_MS",
    "HISTORY_WINDOW_MS",
    "PUBLISH_INTERVAL_MS",
    "MetricsStore",
]

PUBLISH_INTERVAL_MS = 200
"""How stale the published metrics may be behind the reports."""
HISTORY_RESOLUTION_MS = 1_000
"""At most one history point per vertex per this many milliseconds."""
HISTORY_WINDOW_MS = 600_000
"""How far back the history goes (10 minutes)."""


@dataclass(frozen=True)
class _Entry:
    report: TaskMetricsReport
    view: SubtaskMetricsView


class MetricsStore:
    """Latest metrics per subtask, rates, aggregates, history (see the module docstring)."""

    def __init__(
        self,
        vertices: Iterable[tuple[int, str, int]],
        clock: Clock,
        *,
        history_window_ms: int = HISTORY_WINDOW_MS,
        history_resolution_ms: int = HISTORY_RESOLUTION_MS,
    ) -> None:
        """`vertices`: (vertex id, name, parallelism) of the job graph's vertices."""
        self._vertices = tuple(vertices)
        self._clock = clock
        self._resolution_ms = history_resolution_ms
        points = max(1, history_window_ms // max(1, history_resolution_ms))
        self._history: dict[int, deque[HistoryPoint]] = {
            vertex_id: deque(maxlen=points) for vertex_id, _, _ in self._vertices
        }
        self._last_point_ms: int | None = None
        self._entries: dict[SubtaskId, _Entry] = {}
        self._attempt = 0
        self._dirty = False
        self._published_at: float | None = None
        self.snapshot = MetricsSnapshot(clock.epoch_millis(), 0, 0)
        """The latest published snapshot: any thread may read it."""

    # ---- JobMaster thread -------------------------------------------------------------------

    def attempt_started(self, attempt: int) -> None:
        """Attempt `attempt` starts: reports of earlier attempts are dropped (their totals ended
        with them) and the restarts counted; published at once."""
        self._attempt = attempt
        self._entries = {s: e for s, e in self._entries.items() if e.report.attempt >= attempt}
        self.publish()

    def report(self, subtask: SubtaskId, report: TaskMetricsReport) -> None:
        """A task's report (of the current attempt: the JobMaster refuses others)."""
        previous = self._entries.get(subtask)
        usable = (
            previous is not None
            and previous.report.attempt == report.attempt
            and report.time_ms > previous.report.time_ms
        )
        before = previous.report if usable and previous is not None else None
        self._entries[subtask] = _Entry(report, _subtask_view(subtask, report, before))
        self._dirty = True
        self.publish_if_due()

    def publish_if_due(self) -> None:
        """Publish new reports if the last publication is PUBLISH_INTERVAL_MS old."""
        if not self._dirty:
            return
        published = self._published_at
        if published is None or (self._clock.monotonic() - published) * 1000 >= PUBLISH_INTERVAL_MS:
            self.publish()

    def publish(self) -> MetricsSnapshot:
        """Build, publish and return the snapshot of what the store holds now."""
        now_ms = self._clock.epoch_millis()
        subtasks = tuple(
            entry.view
            for _, entry in sorted(
                self._entries.items(), key=lambda item: (item[0].vertex_id, item[0].subtask_index)
            )
        )
        vertices = tuple(
            _vertex_view(vid, name, parallelism, [s for s in subtasks if s.vertex_id == vid])
            for vid, name, parallelism in self._vertices
        )
        if subtasks and (
            self._last_point_ms is None or now_ms - self._last_point_ms >= self._resolution_ms
        ):
            self._last_point_ms = now_ms
            for vertex in vertices:
                self._history[vertex.vertex_id].append(
                    HistoryPoint(
                        now_ms,
                        vertex.records_in_per_second,
                        vertex.records_out_per_second,
                        vertex.backpressured_ms_per_second,
                        vertex.busy_ms_per_second,
                        vertex.watermark_lag_ms,
                    )
                )
        self.snapshot = MetricsSnapshot(
            time_ms=now_ms,
            attempt=self._attempt,
            restarts=self._attempt,
            vertices=vertices,
            subtasks=subtasks,
            history={vertex_id: tuple(points) for vertex_id, points in self._history.items()},
        )
        self._dirty = False
        self._published_at = self._clock.monotonic()
        return self.snapshot


def _rate(now: float, before: float | None, seconds: float) -> float | None:
    """Per second between two totals; None without a usable earlier total (none, or higher:
    a restart)."""
    if before is None or seconds <= 0 or now < before:
        return None
    return (now - before) / seconds


def _watermark_lag(time_ms: int, watermark: int | None) -> float | None:
    if watermark is None or watermark >= MAX_WATERMARK:
        return None
    return float(time_ms - watermark)


def _subtask_view(
    subtask: SubtaskId, report: TaskMetricsReport, before: TaskMetricsReport | None
) -> SubtaskMetricsView:
    values = report.values
    earlier: dict[str, Any] = before.values if before is not None else {}
    seconds = (report.time_ms - before.time_ms) / 1000 if before is not None else 0.0

    def rate(name: str, cap: float | None = None) -> float | None:
        per_second = _rate(values[name], earlier.get(name), seconds)
        if per_second is not None and cap is not None:
            per_second = min(per_second, cap)  # timing jitter between report and read
        return per_second

    old_operators = {op["uid"]: op for op in earlier.get("operators", ())}
    operators = tuple(
        _operator_view(op, old_operators.get(op["uid"]), seconds, report.time_ms)
        for op in values["operators"]
    )
    return SubtaskMetricsView(
        vertex_id=subtask.vertex_id,
        subtask_index=subtask.subtask_index,
        attempt=report.attempt,
        time_ms=report.time_ms,
        records_in=values["records_in"],
        records_out=values["records_out"],
        bytes_in=values["bytes_in"],
        bytes_out=values["bytes_out"],
        records_in_per_second=rate("records_in"),
        records_out_per_second=rate("records_out"),
        bytes_in_per_second=rate("bytes_in"),
        bytes_out_per_second=rate("bytes_out"),
        busy_ms_per_second=rate("busy_ms", 1000.0),
        idle_ms_per_second=rate("idle_ms", 1000.0),
        backpressured_ms_per_second=rate("backpressured_ms", 1000.0),
        operators=operators,
    )


def _operator_view(
    op: dict[str, Any], before: dict[str, Any] | None, seconds: float, time_ms: int
) -> OperatorMetricsView:
    earlier = before or {}
    old_user = {name: value for name, _, value in earlier.get("user", ())}
    user = []
    for name, kind, value in op["user"]:
        if kind == "distribution":
            summary = tuple(float(v) for v in value)
            user.append(UserMetricView(name, kind, summary[0], distribution=summary))
        else:
            previous = old_user.get(name) if kind == "meter" else None
            rate = _rate(value, previous, seconds) if isinstance(previous, (int, float)) else None
            user.append(UserMetricView(name, kind, float(value), rate=rate))
    return OperatorMetricsView(
        uid=op["uid"],
        name=op["name"],
        records_in=op["records_in"],
        records_out=op["records_out"],
        records_in_per_second=_rate(op["records_in"], earlier.get("records_in"), seconds),
        records_out_per_second=_rate(op["records_out"], earlier.get("records_out"), seconds),
        watermark=op["watermark"],
        watermark_lag_ms=_watermark_lag(time_ms, op["watermark"]),
        user=tuple(user),
        latency=tuple(
            LatencyView(
                source_vertex_id=int(vertex_id),
                count=int(figures["count"]),
                p50=float(figures["p50"]),
                p95=float(figures["p95"]),
                p99=float(figures["p99"]),
                max=float(figures["max"]),
                min=float(figures["min"]),
                sum=float(figures["sum"]),
            )
            for vertex_id, figures in sorted(op.get("latency", {}).items())
        ),
    )


def _total(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _extreme(values: list[float | None], pick: Any) -> float | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def _vertex_view(
    vertex_id: int, name: str, parallelism: int, subtasks: list[SubtaskMetricsView]
) -> VertexMetricsView:
    if not subtasks:
        return VertexMetricsView(vertex_id, name, parallelism, 0)
    watermarks = [s.watermark for s in subtasks]
    lowest = (
        min(w for w in watermarks if w is not None)
        if len(subtasks) == parallelism and all(w is not None for w in watermarks)
        else None
    )
    lagging = [s for s in subtasks if s.watermark == lowest] if lowest is not None else []
    return VertexMetricsView(
        vertex_id=vertex_id,
        name=name,
        parallelism=parallelism,
        reporting=len(subtasks),
        records_in=sum(s.records_in for s in subtasks),
        records_out=sum(s.records_out for s in subtasks),
        records_in_per_second=_total([s.records_in_per_second for s in subtasks]),
        records_out_per_second=_total([s.records_out_per_second for s in subtasks]),
        bytes_in_per_second=_total([s.bytes_in_per_second for s in subtasks]),
        bytes_out_per_second=_total([s.bytes_out_per_second for s in subtasks]),
        busy_ms_per_second=_extreme([s.busy_ms_per_second for s in subtasks], max),
        idle_ms_per_second=_extreme([s.idle_ms_per_second for s in subtasks], min),
        backpressured_ms_per_second=_extreme(
            [s.backpressured_ms_per_second for s in subtasks], max
        ),
        watermark=lowest,
        watermark_lag_ms=_extreme([s.watermark_lag_ms for s in lagging], max),
    )
