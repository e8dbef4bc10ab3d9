"""The job's metrics in Prometheus' text format: a collector over the published snapshots.

`JobMetricsCollector` reads, at each scrape, the JobView (checkpoint statistics, state)
and the MetricsSnapshot the JobMaster last published; it keeps nothing itself. Each REST
server registers one in a registry of its own (`metrics_registry`), never in
prometheus-client's global one, so two jobs in one driver never mix. Names and labels:

    barrierflow_job_info{job,job_id,state} 1
    barrierflow_job_restarts_total{job}
    barrierflow_task_records_in_total, _records_out_total, _bytes_in_total, _bytes_out_total
    barrierflow_task_records_in_per_second, _records_out_per_second,
    barrierflow_task_busy_time_ms_per_second, _idle_time_ms_per_second,
    barrierflow_task_backpressured_time_ms_per_second        {job,vertex_id,vertex,subtask}
    barrierflow_operator_records_in_total, _records_out_total,
    barrierflow_operator_watermark_ms, _watermark_lag_ms     {job,vertex_id,vertex,subtask,operator}
    barrierflow_operator_latency_ms    summary of the latency markers' ages: quantiles 0.5,
                                       0.95 and 0.99 of the recent ones, _count, _sum
    barrierflow_operator_latency_max_ms                    {job,vertex_id,vertex,subtask,
                                                           operator,source_vertex}
                                       (with latency tracking on; source_vertex: its id)
    barrierflow_checkpoints_completed_total, barrierflow_checkpoints_failed_total,
    barrierflow_checkpoint_last_duration_ms, _last_size_bytes, _last_alignment_ms   {job}
    barrierflow_user_<name>   a user metric, by kind: counter (_total), gauge, meter (_total
                              and _per_second), distribution (summary: quantiles 0.5,
                              0.95 and 0.99 of the recent values, _count, _sum)
                              {job,vertex_id,vertex,subtask,operator}

Totals start again at 0 after a restart (Prometheus' counters tolerate resets); a rate is
left out until a subtask sent two reports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from barrierflow.cluster.metrics.view import MetricsSnapshot, SubtaskMetricsView

__all__ = ["CONTENT_TYPE", "JobMetricsCollector", "metrics_registry", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The classic text format, which `generate_latest` writes."""

TASK_LABELS = ["job", "vertex_id", "vertex", "subtask"]
OPERATOR_LABELS = [*TASK_LABELS, "operator"]


class JobMetricsCollector:
    """A prometheus-client collector over `get_view()` and `get_metrics()` (any thread)."""

    def __init__(
        self, get_view: Callable[[], Any], get_metrics: Callable[[], MetricsSnapshot | None]
    ) -> None:
        self._get_view = get_view
        self._get_metrics = get_metrics

    def describe(self) -> list[Metric]:
        return []  # nothing to read at registration; families come at each scrape

    def collect(self) -> Iterator[Metric]:
        view, snapshot = self._get_view(), self._get_metrics()
        if view is None:
            return
        yield from _job_families(view, snapshot)
        yield from _checkpoint_families(view)
        if snapshot is not None:
            names = {v.vertex_id: v.name for v in view.vertices}
            yield from _task_families(view.name, names, snapshot)
            yield from _latency_families(view.name, names, snapshot)
            yield from _user_families(view.name, names, snapshot)


def metrics_registry(
    get_view: Callable[[], Any], get_metrics: Callable[[], MetricsSnapshot | None]
) -> CollectorRegistry:
    """A registry of its own holding one JobMetricsCollector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JobMetricsCollector(get_view, get_metrics))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The registry's metrics in the text format (CONTENT_TYPE)."""
    return generate_latest(registry)


def _job_families(view: Any, snapshot: MetricsSnapshot | None) -> Iterator[Metric]:
    info = GaugeMetricFamily(
        "barrierflow_job_info", "The job: its id and state", labels=["job", "job_id", "state"]
    )
    info.add_metric([view.name, view.job_id, view.state], 1)
    yield info
    restarts = CounterMetricFamily(
        "barrierflow_job_restarts", "Restarts of the job so far", labels=["job"]
    )
    restarts.add_metric([view.name], snapshot.restarts if snapshot is not None else view.attempt)
    yield restarts


def _checkpoint_families(view: Any) -> Iterator[Metric]:
    stats, job = view.checkpoints, [view.name]
    completed = CounterMetricFamily(
        "barrierflow_checkpoints_completed", "Checkpoints completed", labels=["job"]
    )
    completed.add_metric(job, stats.counts.completed)
    failed = CounterMetricFamily(
        "barrierflow_checkpoints_failed", "Checkpoints failed", labels=["job"]
    )
    failed.add_metric(job, stats.counts.failed)
    yield from (completed, failed)
    latest = stats.latest_completed
    if latest is None:
        return
    for name, documentation, value in (
        ("duration_ms", "Duration of the latest completed checkpoint", latest.duration_ms),
        ("size_bytes", "State size of the latest completed checkpoint", latest.state_bytes),
        ("checkpointed_size_bytes", "Bytes the latest completed checkpoint uploaded "
         "(less than its state size when incremental)", latest.checkpointed_bytes),
        ("alignment_ms", "Longest alignment of the latest completed checkpoint",
         latest.max_alignment_ms),
        ("id", "Id of the latest completed checkpoint", latest.checkpoint_id),
    ):  # fmt: skip
        family = GaugeMetricFamily(
            f"barrierflow_checkpoint_last_{name}", documentation, labels=["job"]
        )
        family.add_metric(job, float(value))
        yield family


_TASK_COUNTERS = (
    ("records_in", "Records the subtask took from its input channels"),
    ("records_out", "Records the subtask sent over its output edges"),
    ("bytes_in", "Bytes the subtask's input channels delivered"),
    ("bytes_out", "Bytes the subtask handed to its output channels"),
)
_TASK_GAUGES = (
    ("records_in_per_second", "records_in_per_second", "Records in per second"),
    ("records_out_per_second", "records_out_per_second", "Records out per second"),
    ("bytes_in_per_second", "bytes_in_per_second", "Bytes in per second"),
    ("bytes_out_per_second", "bytes_out_per_second", "Bytes out per second"),
    ("busy_time_ms_per_second", "busy_ms_per_second", "Milliseconds per second processing"),
    ("idle_time_ms_per_second", "idle_ms_per_second", "Milliseconds per second waiting for input"),
    (
        "backpressured_time_ms_per_second",
        "backpressured_ms_per_second",
        "Milliseconds per second blocked on output credit (backpressure)",
    ),
    ("watermark_lag_ms", "watermark_lag_ms", "Wall clock minus the subtask's input watermark"),
)


def _task_labels(job: str, names: dict[int, str], subtask: SubtaskMetricsView) -> list[str]:
    vertex = subtask.vertex_id
    return [job, str(vertex), names.get(vertex, str(vertex)), str(subtask.subtask_index)]


def _task_families(job: str, names: dict[int, str], snapshot: MetricsSnapshot) -> Iterator[Metric]:
    subtasks = snapshot.subtasks
    for name, documentation in _TASK_COUNTERS:
        family = CounterMetricFamily(f"barrierflow_task_{name}", documentation, labels=TASK_LABELS)
        for subtask in subtasks:
            family.add_metric(_task_labels(job, names, subtask), getattr(subtask, name))
        yield family
    for name, attribute, documentation in _TASK_GAUGES:
        family = GaugeMetricFamily(f"barrierflow_task_{name}", documentation, labels=TASK_LABELS)
        for subtask in subtasks:
            value = getattr(subtask, attribute)
            if value is not None:
                family.add_metric(_task_labels(job, names, subtask), value)
        yield family
    records_in = CounterMetricFamily(
        "barrierflow_operator_records_in", "Records the operator took", labels=OPERATOR_LABELS
    )
    records_out = CounterMetricFamily(
        "barrierflow_operator_records_out", "Records the operator emitted", labels=OPERATOR_LABELS
    )
    watermark = GaugeMetricFamily(
        "barrierflow_operator_watermark_ms",
        "The operator's input watermark",
        labels=OPERATOR_LABELS,
    )
    lag = GaugeMetricFamily(
        "barrierflow_operator_watermark_lag_ms",
        "Wall clock minus the operator's input watermark",
        labels=OPERATOR_LABELS,
    )
    for subtask in subtasks:
        labels = _task_labels(job, names, subtask)
        for operator in subtask.operators:
            operator_labels = [*labels, operator.name]
            records_in.add_metric(operator_labels, operator.records_in)
            records_out.add_metric(operator_labels, operator.records_out)
            if operator.watermark is not None:
                watermark.add_metric(operator_labels, float(operator.watermark))
            if operator.watermark_lag_ms is not None:
                lag.add_metric(operator_labels, operator.watermark_lag_ms)
    yield from (records_in, records_out, watermark, lag)


_QUANTILES = (("0.5", 4), ("0.95", 5), ("0.99", 6))
"""Quantile label and its index in a distribution's summary tuple."""

LATENCY_LABELS = [*OPERATOR_LABELS, "source_vertex"]


def _latency_families(
    job: str, names: dict[int, str], snapshot: MetricsSnapshot
) -> Iterator[Metric]:
    """The latency markers' ages per operator and source vertex (nothing when tracking is off)."""
    summary = Metric(
        "barrierflow_operator_latency_ms",
        "Age of the latency markers from a source vertex when they reached the operator",
        "summary",
    )
    longest = GaugeMetricFamily(
        "barrierflow_operator_latency_max_ms",
        "Oldest latency marker from a source vertex that reached the operator",
        labels=LATENCY_LABELS,
    )
    for subtask in snapshot.subtasks:
        labels = _task_labels(job, names, subtask)
        for operator in subtask.operators:
            for latency in operator.latency:
                values = [*labels, operator.name, str(latency.source_vertex_id)]
                label_map = dict(zip(LATENCY_LABELS, values, strict=True))
                for quantile, figure in (
                    ("0.5", latency.p50),
                    ("0.95", latency.p95),
                    ("0.99", latency.p99),
                ):
                    summary.add_sample(summary.name, {**label_map, "quantile": quantile}, figure)
                summary.add_sample(f"{summary.name}_count", label_map, latency.count)
                summary.add_sample(f"{summary.name}_sum", label_map, latency.sum)
                longest.add_metric(values, latency.max)
    if summary.samples:
        yield from (summary, longest)


def _prometheus_name(name: str) -> str:
    """`barrierflow_user_` and the user's name with anything but [a-zA-Z0-9_] made `_`.

    >>> _prometheus_name("cache.hits-total")
    'barrierflow_user_cache_hits_total'
    """
    return "barrierflow_user_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _user_families(job: str, names: dict[int, str], snapshot: MetricsSnapshot) -> Iterator[Metric]:
    """One family per user metric name and kind; a name used with two kinds gets the kind as
    a suffix on the second."""
    families: dict[str, Metric] = {}
    kinds: dict[str, str] = {}

    def family(name: str, kind: str, make: Callable[[str], Metric]) -> Metric:
        full = _prometheus_name(name)
        if kinds.setdefault(full, kind) != kind:
            full = f"{full}_{kind}"
        if full not in families:
            families[full] = make(full)
        return families[full]

    for subtask in snapshot.subtasks:
        labels = _task_labels(job, names, subtask)
        for operator in subtask.operators:
            operator_labels = [*labels, operator.name]
            label_map = dict(zip(OPERATOR_LABELS, operator_labels, strict=True))
            for metric in operator.user:
                doc = f"User {metric.kind} {metric.name}"
                if metric.kind in ("counter", "meter"):
                    family(
                        metric.name,
                        metric.kind,
                        lambda n, d=doc: CounterMetricFamily(n, d, labels=OPERATOR_LABELS),
                    ).add_metric(operator_labels, metric.value)
                    if metric.kind == "meter" and metric.rate is not None:
                        family(
                            f"{metric.name}_per_second",
                            "meter_rate",
                            lambda n, d=doc: GaugeMetricFamily(n, d, labels=OPERATOR_LABELS),
                        ).add_metric(operator_labels, metric.rate)
                elif metric.kind == "gauge":
                    family(
                        metric.name,
                        "gauge",
                        lambda n, d=doc: GaugeMetricFamily(n, d, labels=OPERATOR_LABELS),
                    ).add_metric(operator_labels, metric.value)
                elif metric.distribution is not None:
                    summary = family(
                        metric.name, "distribution", lambda n, d=doc: Metric(n, d, "summary")
                    )
                    values = metric.distribution
                    for quantile, index in _QUANTILES:
                        summary.add_sample(
                            summary.name, {**label_map, "quantile": quantile}, values[index]
                        )
                    summary.add_sample(f"{summary.name}_count", label_map, values[0])
                    summary.add_sample(f"{summary.name}_sum", label_map, values[1])
    yield from families.values()
