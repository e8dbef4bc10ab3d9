"""Keyed operators on each state backend the job may choose (issue 22): session windows
(window contents, merging-window sets, per-window timers) and a keyed process function
with state and timers, driven directly, checkpointed at a barrier (RocksDB's native files
written into a real checkpoint folder, as the uploader does), restored into a fresh
operator, and finishing with exactly the output of a run that never stopped (no Spark)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support.clocks import ManualClock
from support.operator_harness import context

from barrierflow import _fs
from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.functions import KeyedProcessFunction, ProcessWindowFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.keyed import KeyedOperator, KeyedProcessOperator
from barrierflow.runtime.operators.window import WindowOperator
from barrierflow.runtime.timers import timer_section
from barrierflow.state import ListStateDescriptor
from barrierflow.window import EventTimeSessionWindows

BACKENDS = [
    pytest.param(HashMapStateBackend(), id="hashmap"),
    pytest.param(EmbeddedRocksDBStateBackend(), id="rocksdb"),
]


class Summary(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, sorted(v for _, v in elements))


class Collect(KeyedProcessFunction):
    """Keeps each key's values in a list state; an event-time timer 10 ms after a record
    emits the list so far."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))

    def process_element(self, value, ctx):
        self.seen.add(value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), timestamp, sorted(self.seen.get()))


def sessions() -> KeyedOperator:
    return WindowOperator(
        "w", "w", lambda r: r[0], EventTimeSessionWindows.with_gap(5), ("process", Summary(), None)
    )


def collecting() -> KeyedOperator:
    return KeyedProcessOperator("kp", "kp", lambda r: r[0], Collect())


OPERATORS = {"session windows": sessions, "keyed process": collecting}

BEFORE = [  # (key, value, timestamp) batches, then a watermark
    ([("a", 1, 1), ("a", 3, 4), ("b", 9, 2), ("c", 5, 30)], 3),
    ([("a", 2, 10), ("b", 8, 5)], 6),
]
AFTER = [
    ([("a", 4, 12), ("c", 6, 33), ("d", 7, 40)], 14),
    ([("b", 1, 20)], 100),
]


def started(make: Any, backend: StateBackend, local: Path, restored: RestoredState | None):
    operator = make()
    settings = dataclasses.replace(
        context(ManualClock()), state_backend=backend, local_dir=str(local)
    )
    operator.setup(settings, CollectingOutput())
    operator.initialize_state(restored)
    operator.open()
    return operator


def feed(operator: KeyedOperator, steps: list) -> list:
    for triples, watermark in steps:
        operator.process_batch(
            RecordBatch([(k, v) for k, v, _ in triples], [t for _, _, t in triples])
        )
        operator.process_watermark(Watermark(watermark))
    return operator.output.take()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(OPERATORS))
def test_a_keyed_operator_restored_from_a_checkpoint_gives_the_output_of_a_run_without_one(
    tmp_path: Path, backend: StateBackend, name: str
) -> None:
    make = OPERATORS[name]
    unstopped = started(make, backend, tmp_path / "local-0", None)
    expected = feed(unstopped, BEFORE + AFTER)
    unstopped.close()

    first = started(make, backend, tmp_path / "local-1", None)
    before = feed(first, BEFORE)
    snapshot = first.snapshot_state(1)
    assert snapshot is not None and snapshot.keyed is not None
    feed(first, [([("a", 100, 13)], 6)])  # after the barrier: not in the checkpoint
    checkpoint = _fs.location(tmp_path / "chk-1")
    keyed = snapshot.keyed
    try:
        section = keyed.write(checkpoint.child("subtask-0.state.files-0"))
    finally:
        keyed.release()
    first.abort()  # the attempt fails; its local files go

    restored = RestoredState(
        keyed=[section], timers=[timer_section(snapshot.timers)], base=checkpoint
    )
    second = started(make, backend, tmp_path / "local-2", restored)
    assert before + feed(second, AFTER) == expected
    second.close()
    assert [p for p in tmp_path.glob("local-*/**/*") if p.is_file()] == []
