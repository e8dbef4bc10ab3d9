"""Event time end to end on Spark: per-split watermarks over out-of-order files, a split
that goes idle while its subtask reads another, event-time timers in a KeyedProcessFunction,
a union, side outputs, and a task killed mid-run.

The job sums values per key in 10 s tumbling windows with event-time timers. Its output is
compared with the same sums computed here in plain Python over the same events.

A record whose window has already fired is late and goes to a side output (as Flink's
windows do). Which b-records are late depends on timing, by Flink's semantics: once every
a-file is read, the file channels are idle until a b-file is started, and the finished
`extra` source counts as MAX_WATERMARK, so the watermark may jump to the end. So the
check is that every window's on-time sum plus its late records equals the expected sum.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, defaultdict

import pytest

from barrierflow import (
    Duration,
    OutputTag,
    RestartStrategies,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.functions import KeyedProcessFunction
from barrierflow.state import MapStateDescriptor

from .conftest import read_rows

pytestmark = pytest.mark.spark

WINDOW = 10_000
B_START = 100_000
"""Every event of the b-files is at or after this; every a-file event is before it."""
KEYS = ["k0", "k1", "k2", "k3", "k4"]
ALERTS = OutputTag("alerts")
LATE = OutputTag("late")
PROGRESS = OutputTag("progress")
MAX_WATERMARK = 2**63 - 1


def write_inputs(folder) -> list[dict]:
    """Two long a-files (0-60 s, out of order by up to 1.5 s) and two short b-files (>= 100 s).

    Splits go to subtasks round-robin in name order: subtask 0 reads a0 then b0, subtask 1
    reads a1 then b1. While a subtask reads its a-file, its b-split has no events: with
    idleness it stops holding the watermark back.
    """
    rng = random.Random(7)
    folder.mkdir()
    events = []
    for name, count, start, step in (
        ("a0", 6000, 0, 10),
        ("a1", 6000, 0, 10),
        ("b0", 40, B_START, 100),
        ("b1", 40, B_START, 100),
    ):
        lines = []
        for i in range(count):
            base = start + i * step
            ts = max(start, base - rng.randint(0, 1_500))
            event = {"key": rng.choice(KEYS), "ts": ts, "v": rng.randint(-3, 100)}
            events.append(event)
            lines.append(json.dumps(event))
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return events


def extra_events() -> list[dict]:
    rng = random.Random(11)
    return [
        {"key": rng.choice(KEYS), "ts": rng.randint(0, 59_999), "v": rng.randint(-3, 100)}
        for _ in range(30)
    ]


class SlowDown:
    """Makes reading the files take seconds, so watermarks advance while the job runs."""

    def __call__(self, event: dict) -> dict:
        time.sleep(0.0005)
        return event


class TumblingSums(KeyedProcessFunction):
    """Per key and 10 s window: (key, window start, count, sum), emitted by an event-time timer.

    Negative values also go to the side output ALERTS; each firing reports the watermark
    that fired it to PROGRESS.
    """

    def open(self, runtime_context):
        self.windows = runtime_context.get_map_state(MapStateDescriptor("windows", None, None))

    def process_element(self, event, ctx):
        start = ctx.timestamp() // WINDOW * WINDOW
        if event["v"] < 0:
            ctx.output(ALERTS, (event["key"], event["ts"], event["v"]))
        if start + WINDOW - 1 <= ctx.timer_service().current_watermark():
            yield LATE, (event["key"], start, event["v"])  # PyFlink's way to a side output
            return
        count, total = self.windows.get(start) or (0, 0)
        self.windows.put(start, (count + 1, total + event["v"]))
        ctx.timer_service().register_event_time_timer(start + WINDOW - 1)

    def on_timer(self, timestamp, ctx):
        start = timestamp - WINDOW + 1
        count, total = self.windows.get(start)
        self.windows.remove(start)
        key = ctx.get_current_key()
        yield PROGRESS, (key, start, ctx.timer_service().current_watermark())
        yield (key, start, count, total)


def event_time_job(tmp_path, events_dir, restart=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(restart or RestartStrategies.fixed_delay_restart(3, 200))
    env.get_config().set_auto_watermark_interval(50)
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2))
        .with_timestamp_assigner(lambda event, record_timestamp: event["ts"])
        .with_idleness(Duration.of_millis(200))
    )
    files = (
        env.from_source(FileSource.for_json_lines(str(events_dir)), strategy, "files")
        .map(SlowDown())
        .uid("slow")
    )
    # Parallelism 1 here and at the side sinks: the job fits the session's 8 slots.
    extra = env.from_source(CollectionSource(extra_events()), strategy, "extra").set_parallelism(1)
    sums = files.union(extra).key_by(lambda event: event["key"]).process(TumblingSums()).uid("sums")
    sums.sink_to(FileSink.for_rows(str(tmp_path / "sums"))).uid("sums-sink")
    for tag in (ALERTS, PROGRESS, LATE):
        (
            sums.get_side_output(tag)
            .sink_to(FileSink.for_rows(str(tmp_path / tag.tag_id)))
            .uid(f"{tag.tag_id}-sink")
            .set_parallelism(1)
        )
    return env


def expected(events: list[dict]) -> tuple[dict, Counter]:
    """(count, sum) per (key, window start), and the alerts, computed independently."""
    windows: dict = defaultdict(lambda: (0, 0))
    for event in events:
        window = (event["key"], event["ts"] // WINDOW * WINDOW)
        count, total = windows[window]
        windows[window] = (count + 1, total + event["v"])
    alerts = Counter((e["key"], e["ts"], e["v"]) for e in events if e["v"] < 0)
    return dict(windows), alerts


def committed_windows(tmp_path) -> dict:
    """(count, sum) per (key, window start): the fired window plus its late records."""
    windows: dict = defaultdict(lambda: (0, 0))
    for (key, start, count, total), times in read_rows(tmp_path / "sums").items():
        assert times == 1, f"window {key} {start} committed {times} times"
        windows[(key, start)] = (count, total)
    for (key, start, value), times in read_rows(tmp_path / "late").items():
        count, total = windows[(key, start)]
        windows[(key, start)] = (count + times, total + value * times)
    return dict(windows)


def test_event_time_timers_fire_per_window_as_watermarks_pass_an_idle_split(spark, tmp_path):
    events = write_inputs(tmp_path / "in") + extra_events()
    event_time_job(tmp_path, tmp_path / "in").execute("event-time-windows")

    expected_windows, expected_alerts = expected(events)
    assert committed_windows(tmp_path) == expected_windows
    assert read_rows(tmp_path / "alerts") == expected_alerts
    late = read_rows(tmp_path / "late")
    assert all(start >= B_START for _, start, _ in late), "an a-record came late"

    # The a-windows mostly fired while the a-files were being read (at a watermark below
    # every b-event): the idle b-splits held nothing back. Without idleness, no a-window
    # could fire before a b-file was read.
    progress = read_rows(tmp_path / "progress")
    assert all(times == 1 for times in progress.values())
    a_windows = [watermark for _, start, watermark in progress if start < B_START]
    early = [watermark for watermark in a_windows if watermark < B_START]
    assert len(early) >= len(a_windows) // 2, f"{len(early)} of {len(a_windows)} fired early"
    # The b-windows fire only at the end of the input (the maximum watermark) or
    # once the b-events' own watermark passes them.
    assert all(w >= B_START for _, start, w in progress if start >= B_START)


def test_killing_the_timer_task_mid_run_changes_no_window_result(spark, tmp_path):
    events = write_inputs(tmp_path / "in") + extra_events()
    job = event_time_job(tmp_path, tmp_path / "in").execute_async("event-time-kill")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    vertex = next(v.vertex_id for v in job.job_graph.vertices if "KeyedProcess" in v.name)
    job.kill_task_process(vertex, 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    expected_windows, expected_alerts = expected(events)
    assert committed_windows(tmp_path) == expected_windows
    assert read_rows(tmp_path / "alerts") == expected_alerts
