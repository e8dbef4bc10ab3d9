"""map, flat_map and filter on a keyed stream reach keyed state (issue 24 item 8): a
function's `open` gets a runtime context whose value, list, map, reducing and aggregating
states are scoped to each record's key, as in PyFlink; the state is in the operator's
checkpoint and comes back on restore. Driven event by event, no Spark."""

from __future__ import annotations

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import StreamExecutionEnvironment
from barrierflow.functions import FilterFunction, FlatMapFunction, MapFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.keyed import KeyedProcessOperator
from barrierflow.runtime.operators.keyed_stateless import KeyedFilter, KeyedFlatMap, KeyedMap
from barrierflow.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.state.backend import canonical_section


class CountPerKey(MapFunction):
    """(word, how many times this word was seen so far) from a ValueState."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def map(self, value):
        count = (self.count.value() or 0) + 1
        self.count.update(count)
        return value, count


class Average:
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class EveryState(FlatMapFunction):
    """Touches all five kinds of keyed state per record and reports them."""

    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last"))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))
        self.by_value = runtime_context.get_map_state(MapStateDescriptor("by_value"))
        self.total = runtime_context.get_reducing_state(
            ReducingStateDescriptor("total", lambda a, b: a + b)
        )
        self.mean = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("mean", Average())
        )

    def flat_map(self, value):
        key, n = value
        previous = self.last.value()
        self.last.update(n)
        self.seen.add(n)
        self.by_value.put(n, self.by_value.get(n) + 1 if self.by_value.contains(n) else 1)
        self.total.add(n)
        self.mean.add(n)
        yield key, previous, list(self.seen.get()), dict(self.by_value.items()), \
            self.total.get(), self.mean.get()  # fmt: skip


class FirstOfEachKey(FilterFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))

    def filter(self, value):
        if self.seen.value():
            return False
        self.seen.update(True)
        return True


def run(function, records, restored=None, timestamps=None):
    operator = KeyedProcessOperator("k", "Keyed", lambda r: r[0], function)
    operator, out = started(operator, ManualClock(), restored)
    operator.process_batch(RecordBatch(records, timestamps))
    return operator, out.take()


def test_a_keyed_map_counts_per_key_in_value_state():
    records = [("a",), ("b",), ("a",), ("a",), ("b",)]
    _, out = run(KeyedMap(CountPerKey()), records, timestamps=[1, 2, 3, 4, 5])
    assert out == [
        ("record", (("a",), 1), 1),
        ("record", (("b",), 1), 2),
        ("record", (("a",), 2), 3),
        ("record", (("a",), 3), 4),
        ("record", (("b",), 2), 5),
    ]


def test_a_keyed_flat_map_reaches_all_five_kinds_of_keyed_state():
    _, out = run(KeyedFlatMap(EveryState()), [("a", 2), ("b", 7), ("a", 4), ("a", 2)])
    assert [value for _, value, _ in out] == [
        ("a", None, [2], {2: 1}, 2, 2.0),
        ("b", None, [7], {7: 1}, 7, 7.0),
        ("a", 2, [2, 4], {2: 1, 4: 1}, 6, 3.0),
        ("a", 4, [2, 4, 2], {2: 2, 4: 1}, 8, 8 / 3),
    ]


def test_a_keyed_filter_keeps_the_first_record_of_each_key():
    records = [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2)]
    _, out = run(KeyedFilter(FirstOfEachKey()), records)
    assert [value for _, value, _ in out] == [("a", 1), ("b", 1), ("c", 1)]


def test_the_keyed_state_of_a_map_is_checkpointed_and_restored():
    operator, _ = run(KeyedMap(CountPerKey()), [("a",), ("a",), ("b",)])
    snapshot = operator.snapshot_state(1)
    restored = RestoredState(keyed=[canonical_section(snapshot.keyed)])
    _, out = run(KeyedMap(CountPerKey()), [("a",), ("b",)], restored)
    assert [value for _, value, _ in out] == [(("a",), 3), (("b",), 2)]


def test_plain_callables_work_on_a_keyed_stream_too():
    _, out = run(KeyedMap(lambda r: r[0].upper()), [("a",), ("b",)])
    assert [value for _, value, _ in out] == ["A", "B"]
    _, out = run(KeyedFilter(lambda r: r[0] == "b"), [("a",), ("b",)])
    assert [value for _, value, _ in out] == [("b",)]


def test_keyed_map_flat_map_filter_become_keyed_operators_in_the_graph():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    keyed = env.from_collection([("a",)]).key_by(lambda r: r[0])
    keyed.map(CountPerKey()).print()
    keyed.flat_map(EveryState()).print()
    keyed.filter(FirstOfEachKey()).print()
    operators = [op for v in env.get_job_graph().vertices for op in v.operators]
    keyed_ops = [op for op in operators if op.name in ("Map", "FlatMap", "Filter")]
    assert [op.transformation.operator_class for op in keyed_ops] == [KeyedProcessOperator] * 3


def test_keyed_state_on_a_stream_without_key_by_is_refused_with_one_line():
    from barrierflow.errors import ConfigurationError
    from barrierflow.runtime.operators.stateless import MapOperator

    operator = MapOperator("m", "Map", CountPerKey())
    with pytest.raises(ConfigurationError, match="only available on a keyed stream"):
        started(operator, ManualClock())
