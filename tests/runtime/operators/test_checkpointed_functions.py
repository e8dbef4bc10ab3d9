"""A CheckpointedFunction behind every API call that can host one keeps its operator list
state (co_map, co_flat_map, window and all-window functions), and the API calls that
cannot host one refuse it when the job is defined, naming the function (issue 11)."""

from __future__ import annotations

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import AsyncDataStream, StreamExecutionEnvironment
from barrierflow.errors import JobDefinitionError
from barrierflow.functions import (
    AggregateFunction,
    AllWindowFunction,
    AsyncFunction,
    CheckpointedFunction,
    CoFlatMapFunction,
    CoGroupFunction,
    CoMapFunction,
    JoinFunction,
    ProcessJoinFunction,
    ProcessWindowFunction,
    ReduceFunction,
)
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.state import ListStateDescriptor
from barrierflow.state.backend import canonical_section
from barrierflow.state.operator_state import decode_operator_state, encode_operator_state
from barrierflow.window import TumblingEventTimeWindows


class Counting(CheckpointedFunction):
    """Counts the records it saw in a split list state "seen"; `restored` is what it got."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("seen"))
        self.restored = self.state.get()
        self.seen = sum(self.restored)

    def snapshot_state(self, context):
        self.state.update([self.seen])


class CountingCoMap(Counting, CoMapFunction):
    def map1(self, value):
        self.seen += 1
        return value

    def map2(self, value):
        self.seen += 1
        return value


class CountingCoFlatMap(Counting, CoFlatMapFunction):
    def flat_map1(self, value):
        self.seen += 1
        return [value]

    def flat_map2(self, value):
        self.seen += 1
        return [value]


class CountingWindow(Counting, ProcessWindowFunction):
    def process(self, key, context, elements):
        self.seen += 1
        return [(key, len(list(elements)))]


class CountingAllWindow(Counting, AllWindowFunction):
    def apply(self, window, inputs):
        self.seen += 1
        return [len(list(inputs))]


class CountingReduce(Counting, ReduceFunction):
    def reduce(self, a, b):
        self.seen += 1
        return a + b


def _env():
    return StreamExecutionEnvironment.get_execution_environment()


def _operator(stream):
    """The operator a subtask of `stream`'s last transformation runs."""
    return stream._transformation.make_operator("u")


def _restart(operator):
    """What a fresh copy of `operator` restores from its snapshot (operator state through
    a checkpoint file's msgpack)."""
    snapshot = operator.snapshot_state(1)
    assert snapshot is not None and snapshot.operator is not None
    stored = decode_operator_state(encode_operator_state(snapshot.operator))
    return RestoredState(
        keyed=[canonical_section(snapshot.keyed)] if snapshot.keyed else [], operator=[(0, stored)]
    )


def _connected(env):
    return env.from_collection([1]).connect(env.from_collection([2]))


@pytest.mark.parametrize(
    ("build", "function_of"),
    [
        (lambda env: _connected(env).map(CountingCoMap()), lambda op: op.function.function),
        (
            lambda env: _connected(env).flat_map(CountingCoFlatMap()),
            lambda op: op.function.function,
        ),
    ],
    ids=["co_map", "co_flat_map"],
)
def test_co_map_and_co_flat_map_functions_keep_operator_list_state(build, function_of):
    env = _env()
    stream = build(env)
    operator, output = started(_operator(stream), ManualClock())
    assert function_of(operator).restored == []
    operator.process_batch1(RecordBatch(["a", "b"]))
    operator.process_batch2(RecordBatch(["c"]))
    assert output.records() == ["a", "b", "c"]
    restored = _restart(operator)

    again, _ = started(_operator(stream), ManualClock(), restored)
    assert function_of(again).restored == [3]


def _timestamped(env):
    return env.from_collection([("a", 1)])


def test_a_process_window_function_keeps_operator_list_state():
    env = _env()
    stream = (
        _timestamped(env)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(10))
        .process(CountingWindow())
    )
    operator, output = started(_operator(stream), ManualClock())
    operator.process_batch(RecordBatch([("a", 1), ("b", 1)], [1, 2]))
    operator.process_watermark(Watermark(9))
    assert sorted(output.records()) == [("a", 1), ("b", 1)]
    function = operator.contents[1]
    assert function.seen == 2

    fresh = _operator(stream)
    started(fresh, ManualClock(), _restart(operator))
    assert fresh.contents[1].restored == [2]


def test_an_incremental_window_reduce_function_keeps_operator_list_state():
    env = _env()
    stream = (
        env.from_collection([1])
        .key_by(lambda r: 0)
        .window(TumblingEventTimeWindows.of(10))
        .reduce(CountingReduce())
    )
    operator, _ = started(_operator(stream), ManualClock())
    operator.process_batch(RecordBatch([1, 2, 3], [1, 2, 3]))
    fresh = _operator(stream)
    started(fresh, ManualClock(), _restart(operator))
    assert fresh.contents[1].restored == [2]


def test_an_all_window_function_keeps_operator_list_state():
    env = _env()
    stream = (
        env.from_collection([1])
        .window_all(TumblingEventTimeWindows.of(10))
        .apply(CountingAllWindow())
    )
    operator, output = started(_operator(stream), ManualClock())
    operator.process_batch(RecordBatch([1, 2], [1, 2]))
    operator.process_watermark(Watermark(9))
    assert output.records() == [2]
    fresh = _operator(stream)
    started(fresh, ManualClock(), _restart(operator))
    assert fresh.contents[1].function.restored == [1]


class Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + value

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


class CountingAggregate(Counting, Sum):
    pass


def test_two_checkpointed_functions_in_one_window_are_refused():
    windowed = (
        _env().from_collection([1]).key_by(lambda r: 0).window(TumblingEventTimeWindows.of(10))
    )
    with pytest.raises(JobDefinitionError, match="CountingAggregate and CountingWindow"):
        windowed.aggregate(CountingAggregate(), CountingWindow())


# ---- refused where no operator hosts it ---------------------------------------------------------


class CountingAsync(Counting, AsyncFunction):
    async def async_invoke(self, value):
        return [value]


class CountingProcessJoin(Counting, ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield left, right


class CountingJoin(Counting, JoinFunction):
    def join(self, first, second):
        return first, second


class CountingCoGroup(Counting, CoGroupFunction):
    def co_group(self, first, second):
        return []


def _keyed_pair(env):
    return env.from_collection([1]).key_by(lambda r: r), env.from_collection([1]).key_by(
        lambda r: r
    )


@pytest.mark.parametrize(
    ("define", "function_name", "where"),
    [
        (
            lambda env: AsyncDataStream.unordered_wait(
                env.from_collection([1]), CountingAsync(), 1000
            ),
            "CountingAsync",
            "an async I/O function",
        ),
        (
            lambda env: AsyncDataStream.ordered_wait(env.from_collection([1]), CountingAsync(), 0),
            "CountingAsync",
            "an async I/O function",
        ),
        (
            lambda env: (
                _keyed_pair(env)[0]
                .interval_join(_keyed_pair(env)[1])
                .between(-1, 1)
                .process(CountingProcessJoin())
            ),
            "CountingProcessJoin",
            "an interval join's process function",
        ),
        (
            lambda env: (
                env.from_collection([1])
                .join(env.from_collection([1]))
                .where(lambda r: r)
                .equal_to(lambda r: r)
                .window(TumblingEventTimeWindows.of(10))
                .apply(CountingJoin())
            ),
            "CountingJoin",
            "a window join's join function",
        ),
        (
            lambda env: (
                env.from_collection([1])
                .co_group(env.from_collection([1]))
                .where(lambda r: r)
                .equal_to(lambda r: r)
                .window(TumblingEventTimeWindows.of(10))
                .apply(CountingCoGroup())
            ),
            "CountingCoGroup",
            "a co-group function",
        ),
    ],
    ids=["unordered_wait", "ordered_wait", "interval_join", "window_join", "co_group"],
)
def test_a_checkpointed_function_where_no_operator_hosts_it_is_refused_by_name(
    define, function_name, where
):
    with pytest.raises(JobDefinitionError) as raised:
        define(_env())
    message = str(raised.value)
    assert message.startswith(f"{function_name} is a CheckpointedFunction, but {where}")
    assert "supported in map, flat_map" in message
