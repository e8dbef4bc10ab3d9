"""Two-input operators in the job graph: each edge names the operator input it feeds, a union
feeding one input keeps that input for all its streams, and a two-input operator never
chains with what feeds it."""

from __future__ import annotations

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.errors import JobDefinitionError
from barrierflow.functions import CoMapFunction, KeyedCoProcessFunction, ProcessJoinFunction
from barrierflow.runtime.partitioners import KeyGroupStreamPartitioner


class Both(CoMapFunction):
    def map1(self, value):
        return value

    def map2(self, value):
        return value


class Keyed(KeyedCoProcessFunction):
    def process_element1(self, value, ctx):
        yield value

    def process_element2(self, value, ctx):
        yield value


class Pair(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield (left, right)


def env():
    environment = StreamExecutionEnvironment.get_execution_environment()
    environment.set_parallelism(2)
    return environment


def edges_into(graph, name):
    vertex = next(v for v in graph.vertices if v.name.startswith(name))
    return vertex, sorted(
        (graph.vertex(e.source_vertex).name, e.target_input) for e in vertex.inputs
    )


def test_each_input_of_a_connected_operator_gets_its_own_edge_and_input_index():
    e = env()
    first, second = e.from_collection([1]), e.from_collection(["x"]).map(str)
    first.connect(second).map(Both()).print()
    vertex, edges = edges_into(e.get_job_graph(), "CoMap")
    assert vertex.name == "CoMap -> Print"
    assert edges == [("Collection", 0), ("Collection -> Map", 1)]


def test_a_union_feeding_the_second_input_keeps_it_for_every_stream():
    e = env()
    a, b, c = (e.from_collection([i]) for i in range(3))
    a.connect(b.union(c)).map(Both()).print()
    graph = e.get_job_graph()
    _, edges = edges_into(graph, "CoMap")
    assert [index for _, index in edges] == [0, 1, 1]
    subtask = next(v for v in graph.vertices if v.name.startswith("CoMap")).subtasks()[0]
    assert graph.input_channel_inputs(subtask) == [0, 1, 1]  # one channel per collection


def test_keyed_connected_streams_partition_both_inputs_by_their_keys():
    e = env()
    a, b = e.from_collection([(1, "a")]), e.from_collection([(1, "b")])
    a.connect(b).key_by(lambda x: x[0], lambda y: y[0]).process(Keyed()).print()
    graph = e.get_job_graph()
    vertex = next(v for v in graph.vertices if v.name.startswith("KeyedCoProcess"))
    assert [type(edge.partitioner) for edge in vertex.inputs] == [KeyGroupStreamPartitioner] * 2
    assert sorted(edge.target_input for edge in vertex.inputs) == [0, 1]


def test_a_keyed_co_process_function_needs_keyed_streams():
    e = env()
    a, b = e.from_collection([1]), e.from_collection([2])
    with pytest.raises(JobDefinitionError, match="keyed streams"):
        a.connect(b).process(Keyed())


def test_an_interval_join_is_one_two_input_vertex_with_late_side_outputs():
    from barrierflow import OutputTag

    e = env()
    late = OutputTag("late-left")
    a, b = e.from_collection([1]), e.from_collection([2])
    joined = (
        a.key_by(lambda x: x)
        .interval_join(b.key_by(lambda y: y))
        .between(-5, 5)
        .side_output_left_late_data(late)
        .process(Pair())
    )
    joined.print()
    joined.get_side_output(late).print()
    graph = e.get_job_graph()
    vertex, edges = edges_into(graph, "IntervalJoin")
    assert [index for _, index in edges] == [0, 1]
    assert [edge.side_output for edge in vertex.outputs] == ["late-left"]
