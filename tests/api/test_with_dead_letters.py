"""`with_dead_letters()` on a stream: the operators whose user function runs per record take
it; anything else is refused in one line naming what takes it (issue 21, item 7)."""

from __future__ import annotations

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.errors import JobDefinitionError
from barrierflow.functions import KeyedProcessFunction, ProcessFunction


class Echo(ProcessFunction):
    def process_element(self, value, ctx):
        yield value


class KeyedEcho(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


def test_map_flat_map_filter_process_and_reduce_take_dead_letters():
    env = StreamExecutionEnvironment()
    stream = env.from_collection([1, 2])
    keyed = stream.key_by(lambda v: v)
    for made in (
        stream.map(str),
        stream.flat_map(lambda v: [v]),
        stream.filter(bool),
        stream.process(Echo()),
        keyed.process(KeyedEcho()),
        keyed.reduce(lambda a, b: a),
    ):
        assert made.with_dead_letters() is made
        made.print()
    built = [t.make_operator("uid") for t in env._transformations if t.operator_options]
    assert [type(op).__name__ for op in built] == [
        "MapOperator",
        "FlatMapOperator",
        "FilterOperator",
        "ProcessOperator",
        "KeyedProcessOperator",
        "KeyedReduceOperator",
    ]
    assert all(op.dead_letters for op in built)


def test_a_stream_without_a_per_record_function_refuses_dead_letters():
    env = StreamExecutionEnvironment()
    stream = env.from_collection([1, 2])
    with pytest.raises(JobDefinitionError, match="applies to a map, flat_map, filter, process"):
        stream.with_dead_letters()
    with pytest.raises(JobDefinitionError, match="applies to a map, flat_map, filter, process"):
        stream.map_batches(lambda batch: batch).with_dead_letters()
    with pytest.raises(JobDefinitionError, match="applies to an operator"):
        stream.key_by(lambda v: v).with_dead_letters()
