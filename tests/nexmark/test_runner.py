"""`barrierflow nexmark run`'s settings, figures and report lines, without Spark."""

from __future__ import annotations

import json

import pytest

from barrierflow.cluster.metrics.view import (
    MetricsSnapshot,
    OperatorMetricsView,
    SubtaskMetricsView,
    UserMetricView,
)
from barrierflow.errors import ConfigurationError
from barrierflow.nexmark.latency import GAUGES
from barrierflow.nexmark.runner import (
    PROBE_UID,
    RunReport,
    RunSettings,
    _checkpoint_figures,
    _latency,
    count_events,
)


def test_settings_need_exactly_one_of_events_and_input(tmp_path):
    with pytest.raises(ConfigurationError, match="either a number of events"):
        RunSettings("q0")
    events = tmp_path / "events.jsonl"
    events.write_text("{}\n")
    with pytest.raises(ConfigurationError, match="either a number of events"):
        RunSettings("q0", events=10, input_path=str(events))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"events": 0}, "at least 1"),
        ({"events": 10, "parallelism": 0}, "parallelism must be at least 1"),
        ({"events": 10, "checkpoint_interval_ms": 5}, "at least 10 ms"),
        ({"input_path": "/nonexistent/events.jsonl"}, "no events file at /nonexistent"),
        ({"events": 10, "state_backend": "memory"}, "unknown state backend 'memory'; known: "),
        (
            {"events": 10, "state_backend": "rocksdb", "changelog": True},
            "changelog checkpoints are the hashmap backend's; rocksdb has incremental",
        ),
    ],
)
def test_bad_settings_are_refused_naming_the_problem(kwargs, message):
    with pytest.raises(ConfigurationError, match=message):
        RunSettings("q0", **kwargs)


def test_an_unknown_query_is_refused_listing_the_known_ones():
    with pytest.raises(ValueError, match="unknown Nexmark query 'q6'; known: q0, q1"):
        RunSettings("q6", events=10)


def test_a_rate_cannot_pace_an_input_file(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_text("{}\n")
    with pytest.raises(ConfigurationError, match="cannot pace an input file"):
        RunSettings("q0", input_path=str(events), events_per_second=1000)


def test_count_events_counts_lines_with_or_without_a_final_newline(tmp_path):
    with_newline = tmp_path / "a.jsonl"
    with_newline.write_text("{}\n{}\n{}\n")
    without = tmp_path / "b.jsonl"
    without.write_text("{}\n{}")
    empty = tmp_path / "c.jsonl"
    empty.write_text("")
    assert [count_events(str(p)) for p in (with_newline, without, empty)] == [3, 2, 0]


def _subtask(index: int, uid: str, **gauges: float) -> SubtaskMetricsView:
    user = tuple(UserMetricView(name, "gauge", value) for name, value in gauges.items())
    operator = OperatorMetricsView(uid, "op", 0, 0, None, None, None, None, user=user)
    return SubtaskMetricsView(
        vertex_id=3,
        subtask_index=index,
        attempt=0,
        time_ms=0,
        records_in=0,
        records_out=0,
        bytes_in=0,
        bytes_out=0,
        records_in_per_second=None,
        records_out_per_second=None,
        bytes_in_per_second=None,
        bytes_out_per_second=None,
        busy_ms_per_second=None,
        idle_ms_per_second=None,
        backpressured_ms_per_second=None,
        operators=(operator,),
    )


def _probe(index: int, count: int, p50: float, p95: float, p99: float, worst: float):
    figures = dict(zip(GAUGES, (count, p50, p95, p99, worst), strict=True))
    return _subtask(index, PROBE_UID, **figures)


def test_the_latency_is_the_probes_worst_subtask_figure_and_all_results_counted():
    snapshot = MetricsSnapshot(
        time_ms=0,
        attempt=0,
        restarts=0,
        subtasks=(
            _probe(0, 10, 2, 5, 9, 12),
            _probe(1, 20, 3, 4, 8, 30),
            _subtask(0, "q5-slices", latency_p99_ms=70.0),
            _probe(1, 0, 99, 99, 99, 99),  # a subtask that measured nothing yet
        ),
    )
    assert _latency(snapshot) == {"count": 30, "p50": 3, "p95": 5, "p99": 9, "max": 30}
    assert _latency(MetricsSnapshot(time_ms=0, attempt=0, restarts=0)) is None
    assert _latency(None) is None


class _Checkpoint:
    def __init__(
        self, duration_ms: int, state_bytes: int, checkpointed_bytes: int, sync_ms: float = 1.0
    ) -> None:
        self.duration_ms = duration_ms
        self.state_bytes = state_bytes
        self.checkpointed_bytes = checkpointed_bytes
        self.max_sync_ms = sync_ms


def test_checkpoint_figures_are_medians_and_maxima():
    figures = _checkpoint_figures(
        [
            _Checkpoint(10, 100, 100, 2.5),
            _Checkpoint(30, 300, 20, 0.5),
            _Checkpoint(20, 50, 5, 7.0),
        ]
    )
    assert figures == {
        "completed": 3,
        "duration_ms": {"p50": 20, "max": 30},
        "size_bytes": {"p50": 100, "max": 300},
        "checkpointed_bytes": {"p50": 20, "max": 100},
        "sync_ms": {"p50": 2.5, "max": 7.0},
    }
    assert _checkpoint_figures([]) == {
        "completed": 0,
        "duration_ms": None,
        "size_bytes": None,
        "checkpointed_bytes": None,
        "sync_ms": None,
    }


def test_a_report_prints_its_figures_and_serializes_to_json():
    report = RunReport(
        query="q5",
        events=1_000_000,
        parallelism=2,
        checkpoint_interval_ms=1000,
        seconds=4.0,
        events_per_second=250_000.0,
        wall_seconds=12.5,
        latency_ms={"count": 900, "p50": 4.0, "p95": 9.5, "p99": 20.25, "max": 41.0},
        checkpoints={
            "completed": 4,
            "duration_ms": {"p50": 12, "max": 30},
            "size_bytes": {"p50": 2048, "max": 4096},
        },
        restarts=0,
    )
    assert report.lines() == [
        "q5: 1,000,000 events in 4.00 s at parallelism 2: 250,000 events/s (12.5 s with start-up)",
        "latency (event created -> result emitted): p50 4.0 ms, p95 9.5 ms, p99 20.2 ms, "
        "max 41.0 ms",
        "checkpoints: 4 completed every 1000 ms, duration p50 12 ms / max 30 ms, "
        "size p50 2,048 B / max 4,096 B",
    ]
    assert json.loads(json.dumps(report.as_json()))["latency_ms"]["p99"] == 20.25


def test_a_report_of_incremental_checkpoints_says_what_each_uploaded():
    report = RunReport(
        query="q4",
        events=1_000,
        parallelism=2,
        checkpoint_interval_ms=1000,
        seconds=1.0,
        events_per_second=1_000.0,
        wall_seconds=2.0,
        latency_ms=None,
        checkpoints={
            "completed": 2,
            "duration_ms": {"p50": 12, "max": 30},
            "size_bytes": {"p50": 2048, "max": 4096},
            "checkpointed_bytes": {"p50": 100, "max": 4096},
            "sync_ms": {"p50": 1.25, "max": 9.5},
        },
        restarts=0,
    )
    assert report.lines()[-1].endswith(
        "size p50 2,048 B / max 4,096 B, uploaded p50 100 B / max 4,096 B, "
        "barrier pause p50 1.2 ms / max 9.5 ms"
    )
