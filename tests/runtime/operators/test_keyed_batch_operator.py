"""KeyedBatchOperator (`process_batches`) driven directly on both backends, no Spark.

Batch and per-record paths give the same output (q18's `LatestBids` against `LatestBid`
for any bids cut into any batches; q12's `CountPerWindow` against the tumbling
processing-time window it replaced, on a manual clock); state and timers go through a
checkpoint at 2 subtasks and restore at 3 and then 1, ending with exactly the counts of a
run that never stopped; misrouted keys and TTL state are refused with clear errors.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from operator_harness import ManualClock, context

from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.core.state_ttl import StateTtlConfig
from barrierflow.core.time import Duration
from barrierflow.errors import ConfigurationError, StreamCorruptionError
from barrierflow.functions import KeyedBatchFunction
from barrierflow.nexmark.events_file import record_batch_of
from barrierflow.nexmark.model import Bid
from barrierflow.nexmark.queries import q12, q18
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import RestoredState, StreamOperator
from barrierflow.runtime.operators.keyed import KeyedProcessOperator
from barrierflow.runtime.operators.keyed_batch import KeyedBatchOperator
from barrierflow.runtime.operators.window import WindowOperator
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backend import canonical_section
from barrierflow.state.key_groups import (
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from barrierflow.window import TumblingProcessingTimeWindows

MAX_P = 128
BACKENDS = [
    pytest.param(HashMapStateBackend(), id="hashmap"),
    pytest.param(EmbeddedRocksDBStateBackend(), id="rocksdb"),
]


def started(
    operator: StreamOperator,
    backend: StateBackend,
    local: Path,
    clock: ManualClock | None = None,
    restored: RestoredState | None = None,
    index: int = 0,
    parallelism: int = 1,
) -> StreamOperator:
    settings_ = dataclasses.replace(
        context(clock or ManualClock(), subtask_index=index, parallelism=parallelism),
        key_group_range=key_group_range_for_subtask(MAX_P, parallelism, index),
        state_backend=backend,
        local_dir=str(local),
    )
    operator.setup(settings_, CollectingOutput())
    operator.initialize_state(restored)
    operator.open()
    return operator


def records(operator: StreamOperator) -> list[Any]:
    return [event[1] for event in operator.output.take() if event[0] == "record"]


# ---- q18: batch vs per record ------------------------------------------------------------------


def a_bid(auction: int, bidder: int, price: int, at: int, extra: str = "") -> Bid:
    return Bid(auction, bidder, price, "channel-1", "https://x/a/b/c", at, extra)


bid_lists = st.lists(
    st.builds(
        a_bid,
        st.integers(1000, 1003),
        st.integers(1000, 1002),
        st.integers(1, 4),
        st.integers(0, 5),
        st.sampled_from(["", "x"]),
    ),
    max_size=40,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(bid_lists, st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_q18_batches_emit_exactly_the_rows_of_the_per_record_function(
    tmp_path: Path, bids: list[Bid], cuts: list[int]
) -> None:
    per_record = started(
        KeyedProcessOperator("q18", "q18", q18.bidder_and_auction, q18.LatestBid()),
        HashMapStateBackend(),
        tmp_path,
    )
    batched = started(
        KeyedBatchOperator("q18", "q18", "pair", q18.LatestBids()),
        HashMapStateBackend(),
        tmp_path,
    )
    expected: list[dict] = []
    got: list[dict] = []
    at = 0
    for size in cuts * 5:
        part = bids[at : at + size]
        at += size
        if not part:
            break
        per_record.process_batch(RecordBatch(part, [b.date_time for b in part]))
        expected += records(per_record)
        data = q18.pairs_of(record_batch_of(part))
        batched.process_batch(ColumnarBatch(data))
        got += records(batched)
    assert got == expected
    per_record.close()
    batched.close()


# ---- q12: batch vs the window it replaced ------------------------------------------------------


def bidder_batch(bidders: list[int]) -> RecordBatch:
    return RecordBatch([a_bid(1, b, 1, 0) for b in bidders])


@pytest.mark.parametrize("backend", BACKENDS)
def test_q12_counts_per_processing_time_window_as_the_window_operator(
    tmp_path: Path, backend: StateBackend
) -> None:
    clock = ManualClock(5_000)
    window = started(
        WindowOperator(
            "w",
            "w",
            q12.bidder_of,
            TumblingProcessingTimeWindows.of(q12.WINDOW),
            ("aggregate", q12.CountBids(), q12.BidderWindowRow()),
        ),
        HashMapStateBackend(),
        tmp_path / "w",
        clock,
    )
    batched = started(
        KeyedBatchOperator("q12", "q12", "bidder", q12.CountPerWindow()),
        backend,
        tmp_path / "b",
        clock,
    )
    steps = [([1, 2, 1], 3_000), ([2, 2, 3], 1_999), ([1], 1), ([3, 3], 12_000), ([4], 20_000)]
    expected: list[list[dict]] = []
    got: list[list[dict]] = []
    for bidders, advance in steps:
        window.process_batch(RecordBatch([a_bid(1, b, 1, 0) for b in bidders]))
        batched.process_batch(bidder_batch(bidders))
        assert records(batched) == []  # nothing before a window's end
        clock.advance(advance)
        for op, out in ((window, expected), (batched, got)):
            op.on_processing_time(clock())
            out.append(sorted(records(op), key=lambda r: r["bidder"]))
    assert got == expected
    assert got[1] == [
        {"bidder": 1, "bid_count": 2, "starttime": 0, "endtime": 10_000},
        {"bidder": 2, "bid_count": 3, "starttime": 0, "endtime": 10_000},
        {"bidder": 3, "bid_count": 1, "starttime": 0, "endtime": 10_000},
    ]
    assert got[-1] == [{"bidder": 4, "bid_count": 1, "starttime": 20_000, "endtime": 30_000}]
    window.close()
    batched.close()


# ---- checkpoint, restore, rescale --------------------------------------------------------------


class Count(KeyedBatchFunction):
    """Counts each key's records; emits (key, count) per key and batch; an event-time timer at
    100 emits ("final", key, count)."""

    def open(self, runtime_context: Any) -> None:
        self.counts = runtime_context.get_batch_state(ValueStateDescriptor("n"))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> list[tuple]:
        seen = Counter(keys)
        distinct = list(seen)
        olds = self.counts.get_many(distinct)
        totals = [(old or 0) + seen[k] for k, old in zip(distinct, olds, strict=True)]
        self.counts.put_many(distinct, totals)
        ctx.register_event_time_timers(distinct, 100)
        return list(zip(distinct, totals, strict=True))

    def on_timer(self, timestamp: int, ctx: Any) -> list[tuple]:
        key = ctx.get_current_key()
        (count,) = self.counts.get_many([key])
        self.counts.remove_many([key])
        return [("final", key, count)]


KEYS = [f"k{i}" for i in range(24)]


def owner(key: str, parallelism: int) -> int:
    return subtask_for_key_group(MAX_P, parallelism, assign_to_key_group(key, MAX_P))


def run_at(parallelism: int, backend: StateBackend, local: Path, restored: list, feed: list):
    """One round at `parallelism`: each subtask restores what overlaps it, takes its
    keys' records, and snapshots; returns (outputs, snapshots)."""
    outputs: list = []
    snapshots = []
    for index in range(parallelism):
        handed = RestoredState()
        own = key_group_range_for_subtask(MAX_P, parallelism, index)
        for old_p, old_index, snapshot in restored:
            old = key_group_range_for_subtask(MAX_P, old_p, old_index)
            if len(old.intersection(own)):
                handed.keyed.append(snapshot.keyed)
                if snapshot.timers is not None:
                    handed.timers.append(snapshot.timers)
        operator = started(
            KeyedBatchOperator("c", "c", "key", Count()),
            backend,
            local / f"{parallelism}-{index}",
            restored=handed,
            index=index,
            parallelism=parallelism,
        )
        mine = [{"key": k} for k in feed if owner(k, parallelism) == index]
        if mine:
            data = pa.RecordBatch.from_pylist(mine)
            operator.process_batch(ColumnarBatch(data))
            operator.process_batch(RecordBatch(mine))  # the Python path: same state
        snapshot = operator.snapshot_state(1)
        snapshot = dataclasses.replace(snapshot, keyed=canonical_section(snapshot.keyed))
        snapshots.append((parallelism, index, snapshot))
        operator.process_watermark(Watermark(1_000))  # after the barrier: not in the snapshot
        outputs += [r for r in records(operator) if r[0] == "final"]
        operator.close()
    return outputs, snapshots


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_and_timers_rescale_2_3_1_to_the_counts_of_an_unstopped_run(
    tmp_path: Path, backend: StateBackend
) -> None:
    first = KEYS[:16]
    second = KEYS[8:]
    third = KEYS[::3]
    _, two = run_at(2, backend, tmp_path, [], first)
    _, three = run_at(3, backend, tmp_path, two, second)
    finals, _ = run_at(1, backend, tmp_path, three, third)
    expected = Counter(first * 2 + second * 2 + third * 2)
    assert sorted(finals) == sorted(("final", k, n) for k, n in expected.items())


# ---- errors ------------------------------------------------------------------------------------


def test_a_misrouted_key_fails_the_batch_before_any_state_changes(tmp_path: Path) -> None:
    operator = started(
        KeyedBatchOperator("c", "c", "key", Count()),
        HashMapStateBackend(),
        tmp_path,
        index=0,
        parallelism=2,
    )
    mine = next(k for k in KEYS if owner(k, 2) == 0)
    other = next(k for k in KEYS if owner(k, 2) == 1)
    with pytest.raises(StreamCorruptionError, match=f"key '{other}' is in key group"):
        batch = pa.RecordBatch.from_pylist([{"key": mine}, {"key": other}])
        operator.process_batch(ColumnarBatch(batch))
    assert list(operator.backend.keys("n")) == []


def test_ttl_state_and_non_batch_functions_are_refused(tmp_path: Path) -> None:
    class WithTtl(Count):
        def open(self, runtime_context: Any) -> None:
            descriptor = ValueStateDescriptor("n")
            descriptor.enable_time_to_live(
                StateTtlConfig.new_builder(Duration.of_seconds(1)).build()
            )
            runtime_context.get_batch_state(descriptor)

    with pytest.raises(ConfigurationError, match="has a TTL"):
        started(KeyedBatchOperator("c", "c", "key", WithTtl()), HashMapStateBackend(), tmp_path)
    with pytest.raises(TypeError, match="needs a KeyedBatchFunction"):
        KeyedBatchOperator("c", "c", "key", q18.LatestBid())
