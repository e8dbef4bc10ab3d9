"""Windows end to end on Spark: tumbling, sliding and session windows over out-of-order file
splits, one split idle until its subtask reaches it, and a late-data side output, compared
with DuckDB queries over the same files; once more with a window task killed mid-run.

Lateness is made deterministic by the input. Event time comes in 1 s bursts every 2 s,
shuffled within 200 ms (the bound is 1 s). Subtask 0 reads the short file a0, then b0
(>= 100 s; idle until then); subtask 1 reads the long file a1, which ends with records
from the first burst: by then both subtasks' watermarks are far past every window those
records belong to, so exactly they are late, in all three window operators. Nothing
else can be late: within a split the disorder is below the bound; while subtask 0 is
idle between its files the watermark is subtask 1's, and b0 comes back ahead of it.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import duckdb
import pytest

from barrierflow import (
    Duration,
    OutputTag,
    RestartStrategies,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)

from .conftest import read_rows

pytestmark = pytest.mark.spark

KEYS = ["k0", "k1", "k2", "k3", "k4"]
TUMBLING = 2_000
SLIDE = 1_000
SLIDING = 4_000
GAP = 300
LATE_TUMBLING = OutputTag("late-tumbling")
LATE_SLIDING = OutputTag("late-sliding")
LATE_SESSION = OutputTag("late-session")


def burst_timestamps(count: int, start: int, rng: random.Random) -> list[int]:
    """`count` timestamps from `start`: 100 per 1 s burst, a 1 s gap after each burst,
    shuffled within blocks of 20 (200 ms)."""
    stamps = [start + (i // 100) * 2_000 + (i % 100) * 10 for i in range(count)]
    for block in range(0, count, 20):
        chunk = stamps[block : block + 20]
        rng.shuffle(chunk)
        stamps[block : block + 20] = chunk
    return stamps


def write_inputs(folder) -> None:
    rng = random.Random(3)
    folder.mkdir()
    files = {
        "a0": burst_timestamps(1_500, 0, rng),
        "a1": burst_timestamps(6_000, 0, rng) + [rng.randint(0, 999) for _ in range(25)],
        "b0": burst_timestamps(200, 100_000, rng),
    }
    for name, stamps in files.items():
        lines = [
            json.dumps({"n": n, "key": rng.choice(KEYS), "ts": ts, "v": rng.randint(-5, 100)})
            for n, ts in enumerate(stamps)
        ]
        (folder / f"{name}.txt").write_text("\n".join(lines) + "\n")


def events_sql(folder) -> str:
    """The input as a DuckDB relation, with `late` marking the records at the end of a1."""
    return f"""
        (SELECT key, ts, v, filename LIKE '%a1.txt' AND n >= 6000 AS late
         FROM read_json('{folder}/*.txt', format='newline_delimited', filename=true,
                        columns={{'n': 'BIGINT', 'key': 'VARCHAR', 'ts': 'BIGINT', 'v': 'BIGINT'}}))
    """


def expected_windows(folder) -> dict:
    """(key, window start, count, sum) per window kind and the late records, from DuckDB."""
    events = events_sql(folder)
    db = duckdb.connect()
    tumbling = db.sql(f"""
        SELECT key, ts // {TUMBLING} * {TUMBLING} AS start, count(*), sum(v)
        FROM {events} WHERE NOT late GROUP BY ALL""").fetchall()
    sliding = db.sql(f"""
        SELECT key, start, count(*), sum(v) FROM (
            SELECT key, v, ts // {SLIDE} * {SLIDE} - k * {SLIDE} AS start
            FROM {events}, range({SLIDING // SLIDE}) AS r(k) WHERE NOT late)
        GROUP BY ALL""").fetchall()
    sessions = db.sql(f"""
        SELECT key, min(ts), max(ts) + {GAP}, count(*), sum(v) FROM (
            SELECT *, sum(new_session) OVER (PARTITION BY key ORDER BY ts, v) AS session FROM (
                SELECT key, ts, v, CASE WHEN ts - lag(ts) OVER (PARTITION BY key ORDER BY ts, v)
                                        <= {GAP} THEN 0 ELSE 1 END AS new_session
                FROM {events} WHERE NOT late))
        GROUP BY key, session""").fetchall()
    late = db.sql(f"SELECT key, ts, v, 1 FROM {events} WHERE late").fetchall()
    return {
        "tumbling": {tuple(r) for r in tumbling},
        "sliding": {tuple(r) for r in sliding},
        "session": {tuple(r) for r in sessions},
        "late": Counter({tuple(r): 3 for r in late}),  # once from each window operator
    }


class SlowDown:
    """Makes reading take seconds, so watermarks advance and checkpoints happen mid-run."""

    def __call__(self, event: dict) -> tuple:
        time.sleep(0.0005)
        return (event["key"], event["ts"], event["v"], 1)


def add(a: tuple, b: tuple) -> tuple:
    return (a[0], max(a[1], b[1]), a[2] + b[2], a[3] + b[3])


class WithWindowStart(ProcessWindowFunction):
    """The one pre-aggregated (key, ts, sum, count) of a window, as (key, start, count, sum)."""

    def process(self, key, context, elements):
        for _, _, total, count in elements:
            yield (key, context.window().start, count, total)


class CountAndSum(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + 1, accumulator[1] + value[2])

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class AggregateWithStart(ProcessWindowFunction):
    def process(self, key, context, elements):
        for count, total in elements:
            yield (key, context.window().start, count, total)


class Session(ProcessWindowFunction):
    """All elements of a session: (key, start, end, count, sum)."""

    def process(self, key, context, elements):
        values = [v for _, _, v, _ in elements]
        window = context.window()
        yield (key, window.start, window.end, len(values), sum(values))


def windows_job(tmp_path, events_dir):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    env.get_config().set_auto_watermark_interval(50)
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
        .with_timestamp_assigner(lambda event, record_timestamp: event["ts"])
        .with_idleness(Duration.of_millis(200))
    )
    keyed = (
        env.from_source(FileSource.for_json_lines(str(events_dir)), strategy, "files")
        .map(SlowDown())
        .uid("slow")
        .key_by(lambda record: record[0])
    )
    tumbling = (
        keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(TUMBLING)))
        .side_output_late_data(LATE_TUMBLING)
        .reduce(add, window_function=WithWindowStart())
        .uid("tumbling")
    )
    # Parallelism 1 for two of the windows and the late sink: the job fits 8 slots.
    sliding = (
        keyed.window(SlidingEventTimeWindows.of(Duration.of_millis(SLIDING), SLIDE))
        .side_output_late_data(LATE_SLIDING)
        .aggregate(CountAndSum(), window_function=AggregateWithStart())
        .uid("sliding")
        .set_parallelism(1)
    )
    session = (
        keyed.window(EventTimeSessionWindows.with_gap(GAP))
        .side_output_late_data(LATE_SESSION)
        .process(Session())
        .uid("session")
        .set_parallelism(1)
    )
    tumbling.sink_to(FileSink.for_rows(str(tmp_path / "tumbling"))).uid("tumbling-sink")
    for name, stream in (("sliding", sliding), ("session", session)):
        stream.sink_to(FileSink.for_rows(str(tmp_path / name))).uid(f"{name}-sink").set_parallelism(
            1
        )
    # Each late record comes once from each of the three windows.
    (
        tumbling.get_side_output(LATE_TUMBLING)
        .union(sliding.get_side_output(LATE_SLIDING), session.get_side_output(LATE_SESSION))
        .sink_to(FileSink.for_rows(str(tmp_path / "late")))
        .uid("late-sink")
        .set_parallelism(1)
    )
    return env


def committed(tmp_path) -> dict:
    result = {}
    for name in ("tumbling", "sliding", "session"):
        rows = read_rows(tmp_path / name)
        assert all(times == 1 for times in rows.values()), f"a {name} window fired twice"
        result[name] = set(rows)
    result["late"] = read_rows(tmp_path / "late")
    return result


def test_window_results_and_late_records_equal_duckdbs_over_an_idle_split(spark, tmp_path):
    write_inputs(tmp_path / "in")
    windows_job(tmp_path, tmp_path / "in").execute("windows")
    expected = expected_windows(tmp_path / "in")
    assert len(expected["late"]) == 25
    assert committed(tmp_path) == expected


def test_killing_a_window_task_mid_run_changes_no_window_result(spark, tmp_path):
    write_inputs(tmp_path / "in")
    job = windows_job(tmp_path, tmp_path / "in").execute_async("windows-kill")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    vertex = next(v.vertex_id for v in job.job_graph.vertices if "Tumbling" in v.name)
    job.kill_task_process(vertex, 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    assert committed(tmp_path) == expected_windows(tmp_path / "in")
