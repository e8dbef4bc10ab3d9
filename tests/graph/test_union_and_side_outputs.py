"""Union and side outputs in the job graph; the auto-watermark interval reaches it."""

from __future__ import annotations

import pytest

from barrierflow import Duration, OutputTag, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.collection import CollectionSource
from barrierflow.errors import JobDefinitionError
from barrierflow.functions import KeyedProcessFunction, ProcessFunction


class Split(ProcessFunction):
    def process_element(self, value, ctx):
        yield value


class Keyed(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


def env_with_parallelism(p: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(p)
    return env


def source(env, name="src"):
    return env.from_source(CollectionSource([1, 2, 3]), WatermarkStrategy.no_watermarks(), name)


def test_a_union_feeds_one_operator_from_every_stream_over_edges():
    env = env_with_parallelism(2)
    source(env, "a").union(source(env, "b"), source(env, "c")).map(str).print()
    graph = env.get_job_graph("union")
    assert [v.name for v in graph.vertices] == ["a", "b", "c", "Map -> Print"]
    assert sorted((e.source_vertex, e.target_vertex) for e in graph.edges) == [
        (0, 3),
        (1, 3),
        (2, 3),
    ]
    consumer = graph.vertices[3].subtasks()[0]
    assert len(graph.input_channels(consumer)) == 3  # forward: one channel per stream
    assert graph.input_channel_inputs(consumer) == [0, 0, 0]


def test_a_keyed_union_hashes_every_input():
    env = env_with_parallelism(2)
    source(env, "a").union(source(env, "b")).key_by(lambda x: x).process(Keyed()).print()
    graph = env.get_job_graph("keyed union")
    assert [repr(e.partitioner) for e in graph.edges] == ["HASH", "HASH"]
    assert len(graph.input_channels(graph.vertices[2].subtasks()[0])) == 4


def test_a_side_output_leaves_its_chained_producer_over_its_own_edge():
    env = env_with_parallelism(2)
    tag = OutputTag("odd")
    processed = source(env).process(Split())
    processed.map(str).print()
    processed.get_side_output(tag).map(repr).print()
    graph = env.get_job_graph("side")
    assert [v.name for v in graph.vertices] == ["src -> Process -> Map -> Print", "Map -> Print"]
    (edge,) = graph.edges
    assert (edge.source_vertex, edge.target_vertex) == (0, 1)
    assert edge.side_output == "odd"
    assert edge.source_operator == 1  # the Process operator, inside the chain
    assert repr(edge.partitioner) == "FORWARD"


def test_a_side_output_can_be_keyed_and_unioned_with_the_main_output():
    env = env_with_parallelism(2)
    tag = OutputTag("odd")
    processed = source(env).process(Split())
    processed.union(processed.get_side_output(tag)).key_by(lambda x: x).process(Keyed()).print()
    graph = env.get_job_graph("side union")
    sides = sorted((e.side_output or "") for e in graph.edges)
    assert sides == ["", "odd"]
    assert all(e.source_operator == 1 for e in graph.edges)


def test_get_side_output_needs_an_operator_and_an_output_tag():
    env = env_with_parallelism(1)
    stream = source(env)
    with pytest.raises(JobDefinitionError, match="OutputTag"):
        stream.get_side_output("odd")
    with pytest.raises(JobDefinitionError, match="applies to an operator"):
        stream.key_by(lambda x: x).get_side_output(OutputTag("odd"))


def test_auto_uids_of_pipelines_without_side_outputs_do_not_change_with_them():
    def uids(with_side: bool):
        env = env_with_parallelism(1)
        processed = source(env).process(Split())
        processed.print()
        if with_side:
            processed.get_side_output(OutputTag("x")).print()
        return env.get_job_graph("uids").operator_uids()

    assert set(uids(False)) <= set(uids(True))


def test_the_auto_watermark_interval_reaches_the_job_graph():
    env = env_with_parallelism(1)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_seconds(1))
    env.from_source(CollectionSource([1]), strategy, "events").print()
    assert env.get_job_graph("default").auto_watermark_interval_ms == 200
    env.get_config().set_auto_watermark_interval(50)
    assert env.get_job_graph("set").auto_watermark_interval_ms == 50


def test_assign_timestamps_and_watermarks_chains_and_needs_a_strategy():
    env = env_with_parallelism(1)
    stream = source(env).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v)
    )
    stream.print()
    assert [v.name for v in env.get_job_graph("tw").vertices] == [
        "src -> Timestamps/Watermarks -> Print"
    ]
    with pytest.raises(JobDefinitionError, match="WatermarkStrategy"):
        source(env).assign_timestamps_and_watermarks(lambda v: v)
