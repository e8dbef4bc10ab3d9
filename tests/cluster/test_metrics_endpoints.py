"""The metrics as the REST endpoint serves them: `/metrics` parsed by prometheus-client's own
parser, the Flink-shaped vertex metrics with `?get=`, the history for charts, and 404s
for ids that name nothing."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from metrics_reports import operator, report
from prometheus_client.parser import text_string_to_metric_families
from test_rest import JOB_ID, job_view, tracker_with_checkpoints

from barrierflow._clock import ManualClock
from barrierflow.cluster.metrics.store import MetricsStore
from barrierflow.cluster.rest.server import RestServer, route
from barrierflow.graph.job_graph import SubtaskId

VERTICES = [(0, "Source: words", 1), (1, "Reduce -> Sink", 2)]


def metrics_store() -> MetricsStore:
    """Two reports of each subtask, one second apart; the sink counts user metrics."""
    store = MetricsStore(VERTICES, ManualClock(epoch_ms=5_000))
    for time_ms, scale in ((1_000, 1), (2_000, 3)):
        store.report(
            SubtaskId(0, 0),
            report(
                time_ms,
                records_out=100 * scale,
                backpressured_ms=250 * scale,
                operators=[operator("src", "Source: words", 0, 100 * scale, watermark=500)],
            ),
        )
        for index in (0, 1):
            store.report(
                SubtaskId(1, index),
                report(
                    time_ms,
                    partition=1 + index,
                    records_in=50 * scale,
                    operators=[
                        operator("count", "Reduce", 50 * scale, 50 * scale, watermark=400 + index),
                        operator(
                            "sink",
                            "Sink",
                            50 * scale,
                            0,
                            watermark=400 + index,
                            user=[
                                ["written", "counter", 50 * scale],
                                ["rows", "meter", 10 * scale],
                                ["depth", "gauge", 2.0],
                                ["lat.ms", "distribution", [4, 10.0, 1.0, 4.0, 2.0, 4.0, 4.0]],
                            ],
                        ),
                    ],
                ),
            )
        store.publish()
    return store


def families(text: str) -> dict[str, list]:
    """Samples by metric family name."""
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture
def served():
    store = metrics_store()
    server = RestServer(
        "127.0.0.1",
        0,
        lambda: job_view(tracker_with_checkpoints()),
        get_metrics=lambda: store.snapshot,
    )
    yield server
    server.close()


def scrape(server: RestServer) -> str:
    with urllib.request.urlopen(server.url + "/metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        return response.read().decode()


def test_the_prometheus_text_parses_and_names_every_figure_with_its_labels(served):
    parsed = families(scrape(served))
    [info] = parsed["barrierflow_job_info"]
    assert info.labels == {"job": "word-count", "job_id": JOB_ID, "state": "RUNNING"}
    records_in = {
        (s.labels["vertex"], s.labels["subtask"]): s.value
        for s in parsed["barrierflow_task_records_in"]
        if s.name.endswith("_total")
    }
    assert records_in == {("Source: words", "0"): 0, ("Reduce -> Sink", "0"): 150,
                          ("Reduce -> Sink", "1"): 150}  # fmt: skip
    [backpressure] = [
        s for s in parsed["barrierflow_task_backpressured_time_ms_per_second"]
        if s.labels["vertex"] == "Source: words"
    ]  # fmt: skip
    assert backpressure.value == 500.0
    lag = {
        (s.labels["operator"], s.labels["subtask"]): s.value
        for s in parsed["barrierflow_operator_watermark_lag_ms"]
    }
    assert lag[("Source: words", "0")] == 2_000 - 500
    assert lag[("Sink", "1")] == 2_000 - 401
    [restarts] = [s for s in parsed["barrierflow_job_restarts"] if s.name.endswith("_total")]
    assert restarts.value == 0


def test_checkpoint_figures_come_from_the_latest_completed_checkpoint(served):
    parsed = families(scrape(served))
    assert parsed["barrierflow_checkpoint_last_id"][0].value == 4
    assert parsed["barrierflow_checkpoint_last_size_bytes"][0].value == 510
    assert parsed["barrierflow_checkpoint_last_duration_ms"][0].value == 105
    assert "barrierflow_checkpoint_last_alignment_ms" in parsed
    completed = [
        s for s in parsed["barrierflow_checkpoints_completed"] if s.name.endswith("_total")
    ]
    assert completed[0].value == 1


def test_user_metrics_appear_by_kind(served):
    parsed = families(scrape(served))
    written = [s for s in parsed["barrierflow_user_written"] if s.name.endswith("_total")]
    assert {s.labels["subtask"]: s.value for s in written} == {"0": 150, "1": 150}
    assert written[0].labels["operator"] == "Sink"
    assert {s.value for s in parsed["barrierflow_user_rows_per_second"]} == {20.0}
    assert {s.value for s in parsed["barrierflow_user_depth"]} == {2.0}
    quantiles = {
        s.labels["quantile"]: s.value
        for s in parsed["barrierflow_user_lat_ms"]
        if "quantile" in s.labels and s.labels["subtask"] == "0"
    }
    assert quantiles == {"0.5": 2.0, "0.95": 4.0, "0.99": 4.0}


def test_two_servers_keep_their_metrics_apart_and_out_of_the_global_registry(served):
    from prometheus_client import REGISTRY, generate_latest

    other = RestServer("127.0.0.1", 0, lambda: job_view(tracker_with_checkpoints()))
    try:
        parsed = families(scrape(other))
        assert "barrierflow_task_records_in" not in parsed  # no metrics store: job figures only
        assert "barrierflow_job_info" in parsed
    finally:
        other.close()
    assert b"barrierflow_" not in generate_latest(REGISTRY)


def test_vertex_metrics_list_ids_without_get_and_values_with_it():
    store, view = metrics_store(), job_view(tracker_with_checkpoints())
    status, ids = route(view, f"/jobs/{JOB_ID}/vertices/1/metrics", metrics=store.snapshot)
    assert status == 200
    assert {"id": "0.numRecordsIn"} in ids and {"id": "1.Sink.written"} in ids
    status, values = route(
        view,
        f"/jobs/{JOB_ID}/vertices/1/metrics?get=0.numRecordsInPerSecond,1.Reduce.currentInputWatermark,nope",
        metrics=store.snapshot,
    )
    assert status == 200
    assert values == [
        {"id": "0.numRecordsInPerSecond", "value": "100"},
        {"id": "1.Reduce.currentInputWatermark", "value": "401"},
    ]


def test_the_history_gives_each_vertex_its_aggregates_and_chart_columns():
    store, view = metrics_store(), job_view(tracker_with_checkpoints())
    status, body = route(view, f"/jobs/{JOB_ID}/metrics/history", metrics=store.snapshot)
    assert status == 200
    source, reduce = body["vertices"]
    assert (source["id"], source["metrics"]["records_out_per_second"]) == (0, 200.0)
    assert reduce["metrics"]["records_in_per_second"] == 200.0
    assert reduce["metrics"]["watermark"] == 400
    assert len(reduce["history"]["time_ms"]) == len(reduce["history"]["watermark_lag_ms"]) == 1
    assert [s["subtask"] for s in reduce["subtasks"]] == [0, 1]


@pytest.mark.parametrize(
    "path",
    [
        "/jobs/other/metrics/history",
        "/jobs/other/vertices/1/metrics",
        f"/jobs/{JOB_ID}/vertices/7/metrics",
        f"/jobs/{JOB_ID}/vertices/x/metrics",
        f"/jobs/{JOB_ID}/metrics/nothing",
    ],
)
def test_ids_that_name_nothing_are_404_json(path):
    store, view = metrics_store(), job_view(tracker_with_checkpoints())
    status, body = route(view, path, metrics=store.snapshot)
    assert status == 404
    assert body["errors"]


def test_an_endpoint_without_metrics_answers_404_on_the_metrics_routes():
    status, body = route(job_view(tracker_with_checkpoints()), f"/jobs/{JOB_ID}/metrics/history")
    assert status == 404 and "no metrics" in body["errors"][0]


def test_metrics_is_read_only(served):
    request = urllib.request.Request(served.url + "/metrics", method="POST", data=b"{}")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code in (404, 405)
