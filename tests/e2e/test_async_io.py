"""Async I/O end to end on Spark: ordered and unordered waits over the same files in one job,
with random call delays and checkpoints while calls are in flight.

A checker right behind each async operator (same subtask) records, for every result, its
arrival position and the watermark it arrived after: ordered results must arrive in input
order per subtask; unordered ones may be reordered, but never behind a watermark at or
above their timestamp.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections import defaultdict

import pytest

from barrierflow import AsyncDataStream, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.functions import AsyncFunction, ProcessFunction

from .conftest import read_rows

pytestmark = pytest.mark.spark

RECORDS = 2_000


def write_inputs(folder) -> None:
    folder.mkdir()
    for part in range(2):
        lines = [json.dumps({"part": part, "n": n, "ts": n * 10}) for n in range(RECORDS)]
        (folder / f"part-{part}.txt").write_text("\n".join(lines) + "\n")


class RandomDelay(AsyncFunction):
    """Answers each record after 0-4 ms."""

    async def async_invoke(self, value):
        await asyncio.sleep(random.random() * 0.004)
        return [(value["part"], value["n"], value["ts"])]


class ArrivalChecker(ProcessFunction):
    """(subtask, arrival position, part, n, ts, watermark when the result arrived)."""

    def open(self, runtime_context):
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.position = 0

    def process_element(self, value, ctx):
        self.position += 1
        yield (self.subtask, self.position, *value, ctx.timer_service().current_watermark())


def async_job(tmp_path, inputs):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.get_config().set_auto_watermark_interval(20)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda event, record_timestamp: event["ts"]
    )
    events = env.from_source(FileSource.for_json_lines(str(inputs)), strategy, "events")
    for name, wait in (
        ("ordered", AsyncDataStream.ordered_wait),
        ("unordered", AsyncDataStream.unordered_wait),
    ):
        (
            wait(events, RandomDelay(), 10_000, 20)
            .uid(name)
            .process(ArrivalChecker())
            .uid(f"{name}-checker")
            .sink_to(FileSink.for_rows(str(tmp_path / name)))
            .uid(f"{name}-sink")
        )
    return env


def arrivals(folder) -> dict[int, list[tuple]]:
    """Per subtask: (part, n, ts, watermark) in arrival order."""
    rows = read_rows(folder)
    assert all(times == 1 for times in rows.values())
    by_subtask: dict[int, list[tuple]] = defaultdict(list)
    for subtask, _position, *rest in sorted(rows, key=lambda row: (row[0], row[1])):
        by_subtask[subtask].append(tuple(rest))
    return by_subtask


def test_ordered_keeps_input_order_and_unordered_never_crosses_a_watermark(spark, tmp_path):
    write_inputs(tmp_path / "in")
    async_job(tmp_path, tmp_path / "in").execute("async-io")
    everything = {(part, n, n * 10) for part in range(2) for n in range(RECORDS)}

    ordered = arrivals(tmp_path / "ordered")
    assert {r[:3] for rs in ordered.values() for r in rs} == everything
    for results in ordered.values():
        assert [r[:3] for r in results] == sorted(r[:3] for r in results)

    unordered = arrivals(tmp_path / "unordered")
    assert {r[:3] for rs in unordered.values() for r in rs} == everything
    reordered = 0
    for results in unordered.values():
        assert all(ts > watermark for _, _, ts, watermark in results), "crossed a watermark"
        reordered += sum(a[1] > b[1] for a, b in itertools.pairwise(results))
    assert reordered > 0, "random delays reordered nothing: the check above proved nothing"
