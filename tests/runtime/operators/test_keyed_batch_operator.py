"""KeyedBatchOperator (`process_batches`) driven directly on both backends, no Spark.

Batch and per-record paths give the same output (q18's `LatestBids` against `LatestBid`
for any bids cut into any batches; q12's `CountPerWindow` against the tumbling
processing-time window it replaced, on a manual clock); state and timers go through a
checkpoint at 2 subtasks and restore at 3 and then 1, ending with exactly the counts of a
run that never stopped; value, list and map state with TTL on the batch path, the TTL
sweep run for every record of a batch; misrouted keys, reducing state and per-key handles
used in `process_batch` are refused with clear errors.
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
from support.clocks import ManualClock
from support.operator_harness import context

from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.core.state_ttl import StateTtlConfig
from barrierflow.errors import ConfigurationError, StreamCorruptionError
from barrierflow.functions import KeyedBatchFunction, KeyedProcessFunction
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
from barrierflow.runtime.timers import timer_section
from barrierflow.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
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


def bidder_batch(bidders: list[int]) -> ColumnarBatch:
    """q12's `map_batches` step over these bidders' bids: one row per bidder with its count."""
    counts = q12.bidders_of(record_batch_of([a_bid(1, b, 1, 0) for b in bidders]))
    assert counts is not None
    return ColumnarBatch(counts)


def test_q12_bidders_of_counts_the_bids_of_arrow_events_and_of_model_events() -> None:
    """The same counts whether the events are Arrow (the Nexmark sources) or model
    NamedTuples made Arrow rows by map_batches (a Person first: its fields must not be
    the only ones kept)."""
    from barrierflow.nexmark.generator import GeneratorConfig, generate_events
    from barrierflow.runtime.columnar import to_arrow

    events = generate_events(GeneratorConfig(seed=3), 500)
    assert type(events[0]).__name__ == "Person"
    expected = Counter(event.bidder for event in events if isinstance(event, Bid))
    for data in (record_batch_of(events), to_arrow(RecordBatch(events))[0]):
        counts = q12.bidders_of(data)
        assert counts is not None
        assert dict(zip(*counts.to_pydict().values(), strict=True)) == expected


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
                    handed.timers.append(timer_section(snapshot.timers))
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


def test_reducing_state_and_non_batch_functions_are_refused(tmp_path: Path) -> None:
    class WithReducing(Count):
        def open(self, runtime_context: Any) -> None:
            runtime_context.get_batch_state(ReducingStateDescriptor("r", lambda a, b: a + b))

    with pytest.raises(
        ConfigurationError,
        match="get_batch_state offers value, list and map state, not ReducingStateDescriptor 'r'",
    ):
        started(
            KeyedBatchOperator("c", "c", "key", WithReducing()), HashMapStateBackend(), tmp_path
        )
    with pytest.raises(TypeError, match="needs a KeyedBatchFunction"):
        KeyedBatchOperator("c", "c", "key", q18.LatestBid())


# ---- TTL, list and map state on the batch path -------------------------------------------------


def ttl_of(descriptor: Any, builder: Any = None) -> Any:
    descriptor.enable_time_to_live((builder or StateTtlConfig.new_builder(100)).build())
    return descriptor


class Remember(KeyedBatchFunction):
    """Per row: (key, the key's last value before the batch, the values it was seen with,
    its map of values), all kept 100 ms after their write."""

    def open(self, runtime_context: Any) -> None:
        self.last = runtime_context.get_batch_state(ttl_of(ValueStateDescriptor("last")))
        self.seen = runtime_context.get_batch_state(ttl_of(ListStateDescriptor("seen")))
        self.per = runtime_context.get_batch_state(ttl_of(MapStateDescriptor("per")))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> list[tuple]:
        values = [row["v"] for row in batch]
        before = self.last.get_many(keys)
        self.last.put_many(keys, values)
        self.seen.add_many(keys, values)
        self.per.put_many(keys, values, [True] * len(keys))
        seen, per = self.seen.get_many(keys), self.per.items_many(keys)
        return list(zip(keys, before, seen, per, strict=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_ttl_value_list_and_map_state_on_the_batch_path(
    tmp_path: Path, backend: StateBackend
) -> None:
    clock = ManualClock(0)
    operator = started(KeyedBatchOperator("r", "r", "k", Remember()), backend, tmp_path, clock)

    def run(rows: list[tuple[str, int]]) -> list[tuple]:
        operator.process_batch(RecordBatch([{"k": k, "v": v} for k, v in rows]))
        return records(operator)

    assert run([("a", 1), ("b", 2)]) == [
        ("a", None, [1], {1: True}),
        ("b", None, [2], {2: True}),
    ]
    clock.now = 60
    assert run([("a", 3)]) == [("a", 1, [1, 3], {1: True, 3: True})]
    clock.now = 100  # what was written at 0 expired, what was written at 60 not
    assert run([("a", 4), ("b", 5)]) == [
        ("a", 3, [3, 4], {3: True, 4: True}),
        ("b", None, [5], {5: True}),
    ]
    operator.close()


class PerKeyUse(Count):
    """Counts with batched state; reads the same state per key in on_timer, and (if
    `misuse`) in process_batch."""

    def __init__(self, misuse: bool) -> None:
        self.misuse = misuse

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.single = runtime_context.get_state(ValueStateDescriptor("n"))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> list[tuple]:
        if self.misuse:
            self.single.value()
        return super().process_batch(batch, keys, ctx)

    def on_timer(self, timestamp: int, ctx: Any) -> list[tuple]:
        return [("timer", ctx.get_current_key(), self.single.value())]


def test_per_key_handles_work_in_on_timer_and_are_refused_in_process_batch(
    tmp_path: Path,
) -> None:
    operator = started(
        KeyedBatchOperator("c", "c", "key", PerKeyUse(False)), HashMapStateBackend(), tmp_path
    )
    operator.process_batch(RecordBatch([{"key": "a"}, {"key": "a"}]))
    operator.process_watermark(Watermark(200))
    assert records(operator) == [("a", 2), ("timer", "a", 2)]
    misused = started(
        KeyedBatchOperator("c", "c", "key", PerKeyUse(True)),
        HashMapStateBackend(),
        tmp_path / "m",
    )
    with pytest.raises(ConfigurationError, match="process_batch has no current key"):
        misused.process_batch(RecordBatch([{"key": "a"}]))


class TouchSome(KeyedBatchFunction):
    """Writes state 'n' (TTL 100, one key checked per record) for the rows with w=True."""

    def open(self, runtime_context: Any) -> None:
        builder = StateTtlConfig.new_builder(100).cleanup_incrementally(1, True)
        self.n = runtime_context.get_batch_state(ttl_of(ValueStateDescriptor("n"), builder))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> None:
        written = [k for k, row in zip(keys, batch, strict=True) if row["w"]]
        self.n.put_many(written, [1] * len(written))


def by_k(row: dict) -> Any:
    return row["k"]


class TouchSomePerRecord(KeyedProcessFunction):
    """TouchSome, one record at a time."""

    def open(self, runtime_context: Any) -> None:
        builder = StateTtlConfig.new_builder(100).cleanup_incrementally(1, True)
        self.n = runtime_context.get_state(ttl_of(ValueStateDescriptor("n"), builder))

    def process_element(self, value: Any, ctx: Any) -> None:
        if value["w"]:
            self.n.update(1)


@pytest.mark.parametrize("per_record", [False, True], ids=["batches", "per-record"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_cleanup_for_every_record_runs_for_every_record(
    tmp_path: Path, backend: StateBackend, per_record: bool
) -> None:
    clock = ManualClock(0)
    if per_record:  # every set_current_key is a record
        function: Any = KeyedProcessOperator("t", "t", by_k, TouchSomePerRecord())
    else:  # a batch of n records counts n
        function = KeyedBatchOperator("t", "t", "k", TouchSome())
    operator = started(function, backend, tmp_path, clock)
    operator.process_batch(RecordBatch([{"k": i, "w": True} for i in range(10)]))
    assert len(list(operator.backend.keys("n"))) == 10
    clock.now = 100
    operator.process_batch(RecordBatch([{"k": "x", "w": False}] * 3))  # no state access
    assert len(list(operator.backend.keys("n"))) == 7
    operator.process_batch(RecordBatch([{"k": "x", "w": False}] * 7))
    assert list(operator.backend.keys("n")) == []
    operator.close()
