"""The JobMaster's MetricsStore, report by report under a ManualClock: rates between two
reports, none across a restart, per-vertex aggregates, watermark lag, user meters, the
bounded history and how often it publishes."""

from __future__ import annotations

from metrics_reports import operator, report

from barrierflow._clock import ManualClock
from barrierflow.cluster.metrics.store import PUBLISH_INTERVAL_MS, MetricsStore
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime.elements import MAX_WATERMARK

SOURCE, COUNT = 0, 1
VERTICES = [(SOURCE, "Source", 1), (COUNT, "Count", 2)]


def store(**kwargs) -> tuple[MetricsStore, ManualClock]:
    clock = ManualClock(epoch_ms=10_000)
    return MetricsStore(VERTICES, clock, **kwargs), clock


def test_rates_come_from_two_reports_of_one_subtask():
    metrics, _ = store()
    subtask = SubtaskId(COUNT, 0)
    metrics.report(subtask, report(1_000, records_in=100, bytes_in=1_000, busy_ms=100))
    first = metrics.publish().subtasks_of(COUNT)[0]
    assert first.records_in == 100
    assert first.records_in_per_second is None  # one report: no rate yet
    metrics.report(
        subtask,
        report(
            3_000, records_in=700, bytes_in=5_000, busy_ms=1_100, idle_ms=600, backpressured_ms=300
        ),
    )
    second = metrics.publish().subtasks_of(COUNT)[0]
    assert second.records_in_per_second == 300.0
    assert second.bytes_in_per_second == 2_000.0
    assert (second.busy_ms_per_second, second.idle_ms_per_second) == (500.0, 300.0)
    assert second.backpressured_ms_per_second == 150.0


def test_no_rate_across_a_restart_and_older_attempts_are_dropped():
    metrics, _ = store()
    subtask = SubtaskId(COUNT, 0)
    metrics.report(subtask, report(1_000, records_in=500))
    metrics.report(SubtaskId(COUNT, 1), report(1_000, partition=2, records_in=50))
    metrics.attempt_started(1)
    snapshot = metrics.snapshot
    assert (snapshot.attempt, snapshot.restarts, snapshot.subtasks) == (1, 1, ())
    metrics.report(subtask, report(2_000, attempt=1, records_in=20))
    assert metrics.publish().subtasks_of(COUNT)[0].records_in_per_second is None
    metrics.report(subtask, report(3_000, attempt=1, records_in=80))
    assert metrics.publish().subtasks_of(COUNT)[0].records_in_per_second == 60.0


def test_a_vertex_sums_rates_takes_the_worst_backpressure_and_the_lowest_watermark():
    metrics, _ = store()
    for index, (records, backpressured, watermark) in enumerate(
        [(100, 50, 7_000), (300, 400, 5_000)]
    ):
        subtask = SubtaskId(COUNT, index)
        metrics.report(subtask, report(1_000, operators=[operator("c", "Count", watermark=1)]))
        metrics.report(
            subtask,
            report(
                2_000,
                records_in=records,
                backpressured_ms=backpressured,
                operators=[operator("c", "Count", records, watermark=watermark)],
            ),
        )
    vertex = metrics.publish().vertex(COUNT)
    assert vertex is not None
    assert (vertex.reporting, vertex.records_in, vertex.records_in_per_second) == (2, 400, 400.0)
    assert vertex.backpressured_ms_per_second == 400.0
    assert (vertex.watermark, vertex.watermark_lag_ms) == (5_000, 2_000 - 5_000)
    source = metrics.snapshot.vertex(SOURCE)
    assert source is not None and source.reporting == 0 and source.watermark is None


def test_a_vertex_has_no_watermark_until_every_subtask_has_one():
    metrics, _ = store()
    metrics.report(SubtaskId(COUNT, 0), report(1_000, operators=[operator("c", "C", watermark=9)]))
    metrics.report(SubtaskId(COUNT, 1), report(1_000, operators=[operator("c", "C")]))
    assert metrics.publish().vertex(COUNT).watermark is None  # type: ignore[union-attr]


def test_watermark_lag_is_the_report_time_minus_the_watermark_and_none_at_the_end():
    metrics, _ = store()
    subtask = SubtaskId(SOURCE, 0)
    metrics.report(subtask, report(60_000, operators=[operator("s", "S", watermark=58_500)]))
    assert metrics.publish().subtasks_of(SOURCE)[0].watermark_lag_ms == 1_500.0
    metrics.report(subtask, report(61_000, operators=[operator("s", "S", watermark=MAX_WATERMARK)]))
    assert metrics.publish().subtasks_of(SOURCE)[0].watermark_lag_ms is None


def test_user_metrics_keep_their_kind_and_a_meter_gets_a_rate():
    metrics, _ = store()
    subtask = SubtaskId(SOURCE, 0)

    def user(count: int) -> list[list]:
        latency = [2, 30.0, 10.0, 20.0, 10.0, 20.0, 20.0]
        return [["hits", "counter", count], ["events", "meter", count * 2],
                ["size", "gauge", 3.5], ["lat", "distribution", latency]]  # fmt: skip

    metrics.report(subtask, report(1_000, operators=[operator("s", "S", user=user(10))]))
    metrics.report(subtask, report(3_000, operators=[operator("s", "S", user=user(30))]))
    views = {m.name: m for m in metrics.publish().subtasks_of(SOURCE)[0].operators[0].user}
    assert (views["hits"].kind, views["hits"].value, views["hits"].rate) == ("counter", 30.0, None)
    assert (views["events"].value, views["events"].rate) == (60.0, 20.0)
    assert views["size"].value == 3.5
    assert views["lat"].distribution == (2.0, 30.0, 10.0, 20.0, 10.0, 20.0, 20.0)


def test_history_keeps_one_point_per_resolution_within_its_window():
    metrics, clock = store(history_window_ms=3_000, history_resolution_ms=1_000)
    subtask = SubtaskId(SOURCE, 0)
    for second in range(6):
        metrics.report(subtask, report(second * 1_000, records_out=second * 100))
        metrics.publish()
        clock.advance(500)
        metrics.publish()  # within the resolution: no new point
        clock.advance(500)
    points = metrics.snapshot.history[SOURCE]
    assert [p.time_ms for p in points] == [13_000, 14_000, 15_000]  # the window: 3 points
    assert [p.records_out_per_second for p in points] == [100.0, 100.0, 100.0]
    assert [p.records_in_per_second for p in metrics.snapshot.history[COUNT]] == [None] * 3


def test_reports_publish_at_most_every_publish_interval():
    metrics, clock = store()
    subtask = SubtaskId(SOURCE, 0)
    metrics.report(subtask, report(1_000, records_out=1))
    assert metrics.snapshot.subtasks[0].records_out == 1  # the first publishes at once
    metrics.report(subtask, report(1_050, records_out=2))
    assert metrics.snapshot.subtasks[0].records_out == 1  # too soon
    metrics.publish_if_due()
    assert metrics.snapshot.subtasks[0].records_out == 1
    clock.advance(PUBLISH_INTERVAL_MS)
    metrics.publish_if_due()  # the attempt's tick
    assert metrics.snapshot.subtasks[0].records_out == 2
