"""Latency markers' figures on the JobMaster's side: the MetricsStore keeps them per operator
and source vertex, `/metrics` serves them as a summary that prometheus-client's parser reads,
and the vertex metrics list them as `<subtask>.<operator>.latency.source_<id>.<part>`."""

from __future__ import annotations

from types import SimpleNamespace

from metrics_reports import operator, report
from prometheus_client.parser import text_string_to_metric_families

from barrierflow._clock import ManualClock
from barrierflow.cluster.metrics.json_bodies import vertex_metrics_json
from barrierflow.cluster.metrics.prometheus import metrics_registry, render
from barrierflow.cluster.metrics.store import MetricsStore
from barrierflow.cluster.metrics.view import LatencyView
from barrierflow.graph.job_graph import SubtaskId

VERTICES = [(0, "Source: words", 1), (1, "Map -> Sink", 1)]


def figures(count: int, p50: float, p95: float, p99: float, top: float) -> dict[str, float]:
    return {
        "count": count, "sum": p50 * count, "min": 1.0, "max": top,
        "p50": p50, "p95": p95, "p99": p99,
    }  # fmt: skip


def store_with_latency() -> MetricsStore:
    store = MetricsStore(VERTICES, ManualClock(epoch_ms=5_000))
    store.report(SubtaskId(0, 0), report(1_000, operators=[operator("src", "Source: words")]))
    store.report(
        SubtaskId(1, 0),
        report(
            1_000,
            partition=1,
            operators=[
                operator("map", "Map", latency={0: figures(10, 3.0, 8.0, 9.0, 12.0)}),
                operator("sink", "Sink", latency={0: figures(10, 4.0, 9.0, 11.0, 15.0)}),
            ],
        ),
    )
    store.publish()
    return store


def job_view() -> SimpleNamespace:
    """The few JobView fields the collector reads, for a job without checkpoints."""
    checkpoints = SimpleNamespace(
        counts=SimpleNamespace(completed=0, failed=0), latest_completed=None
    )
    return SimpleNamespace(
        name="latency-job", job_id="j1", state="RUNNING", attempt=0, vertices=(),
        checkpoints=checkpoints,
    )  # fmt: skip


def test_the_store_keeps_each_operators_latency_per_source_vertex():
    snapshot = store_with_latency().snapshot
    (subtask,) = snapshot.subtasks_of(1)
    mapped, sunk = subtask.operators
    assert sunk.latency == (LatencyView(0, 10, 4.0, 9.0, 11.0, 15.0, min=1.0, sum=40.0),)
    assert mapped.latency[0].p99 == 9.0
    (source,) = snapshot.subtasks_of(0)
    assert source.operators[0].latency == ()  # nothing reached the source


def test_prometheus_serves_latency_as_a_summary_per_operator_and_source_vertex():
    store = store_with_latency()
    text = render(metrics_registry(job_view, lambda: store.snapshot)).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    summary = families["barrierflow_operator_latency_ms"]
    assert summary.type == "summary"
    sink = {
        (sample.name, sample.labels.get("quantile")): sample.value
        for sample in summary.samples
        if sample.labels["operator"] == "Sink"
    }
    assert sink == {
        ("barrierflow_operator_latency_ms", "0.5"): 4.0,
        ("barrierflow_operator_latency_ms", "0.95"): 9.0,
        ("barrierflow_operator_latency_ms", "0.99"): 11.0,
        ("barrierflow_operator_latency_ms_count", None): 10.0,
        ("barrierflow_operator_latency_ms_sum", None): 40.0,
    }
    labels = summary.samples[0].labels
    assert {k: labels[k] for k in ("job", "vertex_id", "vertex", "subtask", "source_vertex")} == {
        "job": "latency-job", "vertex_id": "1", "vertex": "1", "subtask": "0", "source_vertex": "0",
    }  # fmt: skip
    longest = families["barrierflow_operator_latency_max_ms"]
    assert sorted(s.value for s in longest.samples) == [12.0, 15.0]


def test_no_latency_family_without_latency_markers():
    store = MetricsStore(VERTICES, ManualClock())
    store.report(SubtaskId(0, 0), report(1_000, operators=[operator("src", "Source: words")]))
    store.publish()
    text = render(metrics_registry(job_view, lambda: store.snapshot)).decode()
    assert "barrierflow_operator_latency" not in text


def test_vertex_metrics_list_the_latency_ids_and_serve_their_values():
    snapshot = store_with_latency().snapshot
    ids = [entry["id"] for entry in vertex_metrics_json(snapshot, 1, None)]
    assert [i for i in ids if i.startswith("0.Sink.latency")] == [
        f"0.Sink.latency.source_0.{part}" for part in ("count", "p50", "p95", "p99", "max", "min")
    ]
    asked = "0.Sink.latency.source_0.p99,0.Map.latency.source_0.max"
    assert vertex_metrics_json(snapshot, 1, asked) == [
        {"id": "0.Sink.latency.source_0.p99", "value": "11"},
        {"id": "0.Map.latency.source_0.max", "value": "12"},
    ]
