"""Async I/O end to end on Spark: ordered and unordered waits over the same files in one job,
with random call delays and checkpoints while calls are in flight.

A checker right behind each async operator (same subtask) records, for every result, its
arrival position and the watermark it arrived after: ordered results must arrive in input
order per subtask; unordered ones may be reordered, but never behind a watermark at or
above their timestamp.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import socket
import threading
from collections import Counter, defaultdict

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


class AnswerGate:
    """A TCP listener that holds every connection unanswered until `open()`; then it answers
    them all, and every later one at once. Calls in the Spark workers wait on it."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = self._server.getsockname()
        self._lock = threading.Condition()
        self._held: list[socket.socket] = []
        self._opened = False
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                self._lock.notify_all()
                if self._opened:
                    self._answer(conn)
                else:
                    self._held.append(conn)

    def wait_for_held(self, count: int, timeout: float) -> bool:
        """True once `count` calls wait on the gate (bounded by `timeout`)."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self._held) >= count, timeout)

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(b"!")
        conn.close()

    def open(self) -> None:
        with self._lock:
            self._opened = True
            held, self._held = self._held, []
        for conn in held:
            self._answer(conn)

    def close(self) -> None:
        self.open()
        self._server.close()


class WaitForGate(AsyncFunction):
    """Answers a record only once the test opens the gate."""

    def __init__(self, address) -> None:
        self.address = address

    async def async_invoke(self, value):
        reader, writer = await asyncio.open_connection(*self.address)
        try:
            await reader.readexactly(1)
        finally:
            writer.close()
        return [(value["part"], value["n"], value["ts"])]


def test_checkpoints_complete_while_every_async_call_is_outstanding(spark, tmp_path):
    # Issue 9, defect 4: the operator used to wait on its full queue on the task's thread,
    # so no checkpoint trigger ran there until a call came back (or 300 s passed).
    records, capacity = 30, 3
    inputs = tmp_path / "in"
    inputs.mkdir()
    for part in range(2):
        lines = [json.dumps({"part": part, "n": n, "ts": n}) for n in range(records)]
        (inputs / f"part-{part}.txt").write_text("\n".join(lines) + "\n")
    gate = AnswerGate()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(100)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    events = env.from_source(
        FileSource.for_json_lines(str(inputs)), WatermarkStrategy.no_watermarks(), "events"
    )
    (
        AsyncDataStream.ordered_wait(events, WaitForGate(gate.address), 60_000, capacity)
        .uid("gated")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    job = env.execute_async("async-outstanding")
    try:
        # Both subtasks' queues are full: every call is outstanding, the input waits.
        assert gate.wait_for_held(2 * capacity, timeout=120)
        before = len(job.completed_checkpoints)
        checkpointed = job.wait_for_completed_checkpoints(before + 2, timeout=60)
        outstanding = gate.accepted
    finally:
        gate.open()  # a blocked operator gets its answers too, so the job ends either way
    try:
        assert checkpointed, "no checkpoint completed while the async calls were outstanding"
        assert outstanding == 2 * capacity  # no call came back, so none more was started
        job.wait(timeout=180)
    except BaseException:
        job.cancel()
        raise
    finally:
        gate.close()
    assert read_rows(tmp_path / "out") == Counter(
        {(part, n, n): 1 for part in range(2) for n in range(records)}
    )
