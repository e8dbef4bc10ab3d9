"""Joins end to end on Spark: an interval join (connect of two keyed streams into one
two-input operator) and a window join over the same orders and clicks, compared with DuckDB
joins over the same files, while the interval join's task is killed mid-run.

No record can be late: each input is one file whose disorder (100 ms) is below the
watermark bound (500 ms), and a two-input operator's watermark is the minimum of its
inputs'. So the join results are exact, and a restore must neither lose nor repeat a pair.
"""

from __future__ import annotations

import json
import random
import time

import duckdb
import pytest

from barrierflow import Duration, RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.functions import JoinFunction, ProcessJoinFunction
from barrierflow.window import TumblingEventTimeWindows

from .conftest import read_rows

pytestmark = pytest.mark.spark

USERS = [f"u{i}" for i in range(30)]
LOWER, UPPER = -500, 1_000
WINDOW = 2_000


def write_inputs(folder) -> None:
    """orders/ and clicks/: 1500 events each over 30 s, shuffled within 100 ms blocks."""
    rng = random.Random(5)
    for name in ("orders", "clicks"):
        (folder / name).mkdir(parents=True)
        stamps = [i * 20 + rng.randint(0, 19) for i in range(1_500)]
        for block in range(0, len(stamps), 5):
            chunk = stamps[block : block + 5]
            rng.shuffle(chunk)
            stamps[block : block + 5] = chunk
        lines = [
            json.dumps({"id": i, "user": rng.choice(USERS), "ts": ts})
            for i, ts in enumerate(stamps)
        ]
        (folder / name / "part-0.txt").write_text("\n".join(lines) + "\n")


def expected(folder) -> dict:
    """The interval join and the window join as DuckDB computes them."""
    db = duckdb.connect()
    for name in ("orders", "clicks"):
        db.sql(f"CREATE TABLE {name} AS SELECT * FROM read_json('{folder}/{name}/*.txt', "
               "format='newline_delimited', columns={'id': 'BIGINT', 'user': 'VARCHAR', "
               "'ts': 'BIGINT'})")  # fmt: skip
    interval = db.sql(f"""
        SELECT o.id, c.id, greatest(o.ts, c.ts) FROM orders o JOIN clicks c
        ON o.user = c.user AND c.ts BETWEEN o.ts + {LOWER} AND o.ts + {UPPER}""").fetchall()
    window = db.sql(f"""
        SELECT o.id, c.id, o.ts // {WINDOW} * {WINDOW} FROM orders o JOIN clicks c
        ON o.user = c.user AND o.ts // {WINDOW} = c.ts // {WINDOW}""").fetchall()
    return {"interval": {tuple(r) for r in interval}, "window": {tuple(r) for r in window}}


def slow_timestamp(event: dict, record_timestamp: int) -> int:
    """The event's time; reading takes seconds, so checkpoints happen mid-run."""
    time.sleep(0.002)
    return event["ts"]


class OrderAndClick(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield (left["id"], right["id"], ctx.get_timestamp())


class WindowPair(JoinFunction):
    def join(self, first, second):
        return (first["id"], second["id"], first["ts"] // WINDOW * WINDOW)


def joins_job(tmp_path, inputs):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    env.get_config().set_auto_watermark_interval(50)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(500)
    ).with_timestamp_assigner(slow_timestamp)
    orders = env.from_source(FileSource.for_json_lines(str(inputs / "orders")), strategy, "orders")
    clicks = env.from_source(FileSource.for_json_lines(str(inputs / "clicks")), strategy, "clicks")
    (
        orders.key_by(lambda o: o["user"])
        .interval_join(clicks.key_by(lambda c: c["user"]))
        .between(LOWER, UPPER)
        .process(OrderAndClick())
        .uid("interval-join")
        .set_parallelism(2)
        .sink_to(FileSink.for_rows(str(tmp_path / "interval")))
        .uid("interval-sink")
        .set_parallelism(2)
    )
    (
        orders.join(clicks)
        .where(lambda o: o["user"])
        .equal_to(lambda c: c["user"])
        .window(TumblingEventTimeWindows.of(Duration.of_millis(WINDOW)))
        .apply(WindowPair())
        .uid("window-join")
        .set_parallelism(2)
        .sink_to(FileSink.for_rows(str(tmp_path / "window")))
        .uid("window-sink")
        .set_parallelism(2)
    )
    return env


def test_interval_and_window_joins_equal_duckdbs_with_the_join_task_killed(spark, tmp_path):
    write_inputs(tmp_path / "in")
    job = joins_job(tmp_path, tmp_path / "in").execute_async("joins-kill")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    vertex = next(v.vertex_id for v in job.job_graph.vertices if "IntervalJoin" in v.name)
    job.kill_task_process(vertex, 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    want = expected(tmp_path / "in")
    for name in ("interval", "window"):
        rows = read_rows(tmp_path / name)
        assert all(times == 1 for times in rows.values()), f"a {name} pair came twice"
        assert set(rows) == want[name], name
    assert len(want["interval"]) > 1_000 and len(want["window"]) > 1_000
