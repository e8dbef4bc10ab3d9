"""The job's metrics as the REST endpoint's JSON: Flink's vertex-metrics shape and chart data.

`vertex_metrics_json` answers `GET /jobs/<id>/vertices/<vertex_id>/metrics` as Flink
does: without `get`, the ids of the metrics there are (`[{"id": ...}]`); with
`?get=a,b`, those metrics' values as strings (`[{"id": ..., "value": "..."}]`), unknown
ids left out. Ids are `<subtask>.<metric>` for a subtask and `<subtask>.<operator
name>.<metric>` for an operator and its user metrics, with Flink's metric names
(numRecordsIn, busyTimeMsPerSecond, currentInputWatermark, ...); with latency tracking
on, `<subtask>.<operator name>.latency.source_<vertex id>.<part>` (count, p50, p95, p99,
max, min) per source vertex. `metrics_history_json`
answers `GET /jobs/<id>/metrics/history`: per vertex its current aggregates, its
history in columns ready for a chart, and its subtasks' current figures.
"""

from __future__ import annotations

from typing import Any

from barrierflow.cluster.metrics.view import (
    HistoryPoint,
    MetricsSnapshot,
    OperatorMetricsView,
    SubtaskMetricsView,
    VertexMetricsView,
)

__all__ = ["metrics_history_json", "subtask_json", "vertex_metric_values", "vertex_metrics_json"]

_SUBTASK_METRICS = (
    ("numRecordsIn", "records_in"),
    ("numRecordsOut", "records_out"),
    ("numBytesIn", "bytes_in"),
    ("numBytesOut", "bytes_out"),
    ("numRecordsInPerSecond", "records_in_per_second"),
    ("numRecordsOutPerSecond", "records_out_per_second"),
    ("numBytesInPerSecond", "bytes_in_per_second"),
    ("numBytesOutPerSecond", "bytes_out_per_second"),
    ("busyTimeMsPerSecond", "busy_ms_per_second"),
    ("idleTimeMsPerSecond", "idle_ms_per_second"),
    ("backPressuredTimeMsPerSecond", "backpressured_ms_per_second"),
    ("currentInputWatermark", "watermark"),
    ("watermarkLag", "watermark_lag_ms"),
)
"""Flink's metric name and the SubtaskMetricsView attribute it reads."""

_OPERATOR_METRICS = (
    ("numRecordsIn", "records_in"),
    ("numRecordsOut", "records_out"),
    ("numRecordsInPerSecond", "records_in_per_second"),
    ("numRecordsOutPerSecond", "records_out_per_second"),
    ("currentInputWatermark", "watermark"),
    ("watermarkLag", "watermark_lag_ms"),
)

_DISTRIBUTION_PARTS = ("count", "sum", "min", "max", "p50", "p95", "p99")
_LATENCY_PARTS = ("count", "p50", "p95", "p99", "max", "min")

VERTEX_FIGURES = (
    # the figures of a vertex (and of each subtask) the JSON views show
    "records_in",
    "records_out",
    "records_in_per_second",
    "records_out_per_second",
    "bytes_in_per_second",
    "bytes_out_per_second",
    "busy_ms_per_second",
    "idle_ms_per_second",
    "backpressured_ms_per_second",
    "watermark",
    "watermark_lag_ms",
)

_HISTORY_COLUMNS = (
    "time_ms",
    "records_in_per_second",
    "records_out_per_second",
    "backpressured_ms_per_second",
    "busy_ms_per_second",
    "watermark_lag_ms",
)


def vertex_metric_values(snapshot: MetricsSnapshot, vertex_id: int) -> dict[str, Any]:
    """Every metric of the vertex's reporting subtasks by id (None: not known yet)."""
    values: dict[str, Any] = {}
    for subtask in snapshot.subtasks_of(vertex_id):
        prefix = f"{subtask.subtask_index}."
        for name, attribute in _SUBTASK_METRICS:
            values[prefix + name] = getattr(subtask, attribute)
        for operator in subtask.operators:
            _operator_values(values, f"{prefix}{operator.name}.", operator)
    return values


def _operator_values(values: dict[str, Any], prefix: str, operator: OperatorMetricsView) -> None:
    for name, attribute in _OPERATOR_METRICS:
        values[prefix + name] = getattr(operator, attribute)
    for latency in operator.latency:
        for part in _LATENCY_PARTS:
            values[f"{prefix}latency.source_{latency.source_vertex_id}.{part}"] = getattr(
                latency, part
            )
    for metric in operator.user:
        if metric.distribution is not None:
            for part, value in zip(_DISTRIBUTION_PARTS, metric.distribution, strict=True):
                values[f"{prefix}{metric.name}.{part}"] = value
            continue
        values[prefix + metric.name] = metric.value
        if metric.kind == "meter":
            values[f"{prefix}{metric.name}PerSecond"] = metric.rate


def vertex_metrics_json(snapshot: MetricsSnapshot, vertex_id: int, get: str | None) -> list[Any]:
    """Flink's answer: the ids without `get`, else the asked ids with their values."""
    values = vertex_metric_values(snapshot, vertex_id)
    if get is None:
        return [{"id": metric_id} for metric_id in values]
    asked = [part.strip() for part in get.split(",") if part.strip()]
    return [
        {"id": metric_id, "value": _text(values[metric_id])}
        for metric_id in asked
        if metric_id in values
    ]


def _text(value: Any) -> str | None:
    """Flink sends values as strings; whole floats without their `.0`."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _vertex_json(vertex: VertexMetricsView, points: tuple[HistoryPoint, ...]) -> dict[str, Any]:
    return {
        "id": vertex.vertex_id,
        "name": vertex.name,
        "parallelism": vertex.parallelism,
        "reporting": vertex.reporting,
        "metrics": {figure: getattr(vertex, figure) for figure in VERTEX_FIGURES},
        "history": {column: [getattr(p, column) for p in points] for column in _HISTORY_COLUMNS},
    }


def metrics_history_json(snapshot: MetricsSnapshot) -> dict[str, Any]:
    """Per vertex: current aggregates and the history's columns (oldest first)."""
    return {
        "time_ms": snapshot.time_ms,
        "attempt": snapshot.attempt,
        "restarts": snapshot.restarts,
        "vertices": [
            {
                **_vertex_json(vertex, snapshot.history.get(vertex.vertex_id, ())),
                "subtasks": [subtask_json(s) for s in snapshot.subtasks_of(vertex.vertex_id)],
            }
            for vertex in snapshot.vertices
        ],
    }


def subtask_json(subtask: SubtaskMetricsView) -> dict[str, Any]:
    """One subtask's figures by their snake_case names (for a dashboard's subtask table)."""
    return {
        "subtask": subtask.subtask_index,
        "attempt": subtask.attempt,
        "time_ms": subtask.time_ms,
        **{attribute: getattr(subtask, attribute) for _, attribute in _SUBTASK_METRICS},
    }
