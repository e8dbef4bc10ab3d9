"""Broadcast state and count windows on Spark (issue 24 items 13 and 15), through PyFlink's
API: generated records are rules (every tenth) and events. Broadcast (`broadcast(RULES)`)
and keyed, they meet in a KeyedBroadcastProcessFunction that enriches every event with its
block's rule (an event whose rule has not arrived waits in keyed list state until
`apply_to_keyed_state` releases it); keyed, they also go through sliding count windows
(`count_window(4, 2)`). The job runs at parallelism 2, a task fails once, and after the
recovery it is stopped with a savepoint and resumed at parallelism 3 to the end of its
input: the committed output is exactly what a failure-free run commits, computed from the
input alone (a key's records all come from one generator split, so in index order)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from barrierflow import (
    KeyedBroadcastProcessFunction,
    RestartStrategies,
    StreamExecutionEnvironment,
    WatermarkStrategy,
    _fs,
)
from barrierflow.connectors.files import FileSink
from barrierflow.state import ListStateDescriptor, MapStateDescriptor

from .conftest import read_rows
from .jobs import DEPLOY_S, GatedGeneratorSource, wait_for_attempt

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host

RECORDS = 8_000
SPLITS = 8
"""The generator's splits: split k makes records k, k + 8, ...; an event's key is its split."""
RULES = MapStateDescriptor("rules", None, None)
PENDING = ListStateDescriptor("pending")


def record_of(index: int) -> tuple:
    """Every tenth record is the rule of its block of ten, the others are events."""
    return ("rule" if index % 10 == 0 else "event", index, 1)


def rule_of(block: int) -> int:
    return block * 7 % 13


class Enrich(KeyedBroadcastProcessFunction):
    """(event, its block's rule); events whose rule is not there yet wait in keyed state.
    Both inputs carry every record; each side takes its own kind."""

    def open(self, runtime_context):
        self.pending = runtime_context.get_list_state(PENDING)

    def process_element(self, value, ctx):
        kind, index, _ = value
        if kind != "event":
            return
        rule = ctx.get_broadcast_state(RULES).get(index // 10)
        if rule is None:
            self.pending.add(index)
        else:
            yield ("enriched", index, rule)

    def process_broadcast_element(self, value, ctx):
        kind, index, _ = value
        if kind != "rule":
            return
        block, rule = index // 10, rule_of(index // 10)
        ctx.get_broadcast_state(RULES).put(block, rule)
        ready = []

        def release(key, pending):
            waiting = list(pending.get() or ())
            ready.extend(("enriched", i, rule) for i in waiting if i // 10 == block)
            pending.update([i for i in waiting if i // 10 != block])

        ctx.apply_to_keyed_state(PENDING, release)
        yield from ready


def job(tmp_path: Path, parallelism: int, checkpoints: str) -> StreamExecutionEnvironment:
    """Three vertices: the source (parallelism 2 always), the enrichment and the count
    windows (`parallelism`), each with its sink chained: 8 slots at parallelism 3."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / checkpoints))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    source = GatedGeneratorSource(record_of, RECORDS, 4000, tmp_path / "gate", RECORDS // 2)
    records = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "records")
        .uid("records")
        .set_parallelism(2)
    )
    by_split = records.key_by(lambda r: r[1] % SPLITS)
    enriched = by_split.connect(records.broadcast(RULES)).process(Enrich()).uid("enrich")
    enriched.sink_to(FileSink.for_rows(str(tmp_path / "enriched"))).uid("enriched-sink")
    windows = by_split.count_window(4, 2).reduce(lambda a, b: ("w", a[1] + b[1], a[2] + b[2]))
    windows.uid("count-windows").sink_to(FileSink.for_rows(str(tmp_path / "windows"))).uid(
        "windows-sink"
    )
    return env


def expected(kind: str) -> Counter:
    """What a failure-free run commits."""
    if kind == "enriched":
        events = [i for i in range(RECORDS) if i % 10]
        return Counter(("enriched", i, rule_of(i // 10)) for i in events)
    rows: Counter = Counter()
    for key in range(SPLITS):
        ordered = range(key, RECORDS, SPLITS)  # a key's records: one split's, in order
        # PyFlink's sliding count windows: window j holds elements 2j .. 2j+3 and fires full
        for start in range(0, len(ordered) - 3, 2):
            rows[("w", sum(ordered[start : start + 4]), 4)] += 1
    return rows


def test_rules_and_count_windows_survive_a_failure_and_a_rescale_exactly_once(spark, tmp_path):
    first = job(tmp_path, 2, "run-1").execute_async("broadcast-and-count")
    assert first.wait_for_completed_checkpoints(2, timeout=DEPLOY_S)
    enrich = next(v.vertex_id for v in first.job_graph.vertices if "KeyedBroadcast" in v.name)
    first.inject_failure("exception", enrich, 1)
    wait_for_attempt(first, 1, timeout=60)
    # A stop is taken only while the job runs: wait until the restarted attempt does.
    assert first.wait_until_running(1, timeout=120), first.get_job_status()
    stopped = first.stop_with_savepoint(False, str(tmp_path / "savepoints"), timeout=120)
    savepoint = _fs.Location(stopped.result()).path
    first.wait(timeout=60)
    assert first.get_job_status() == "FINISHED"
    assert sum(read_rows(tmp_path / "enriched").values()) < len(expected("enriched"))

    (tmp_path / "gate").touch()  # the rest of the input runs
    env = job(tmp_path, 3, "run-2")
    env.set_savepoint_restore_settings(savepoint)
    env.execute("broadcast-and-count")

    assert read_rows(tmp_path / "enriched") == expected("enriched")
    assert read_rows(tmp_path / "windows") == expected("windows")
