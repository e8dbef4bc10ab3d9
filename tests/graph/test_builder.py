"""Pipelines become job graphs: chaining, partitioners, parallelism and uids."""

from __future__ import annotations

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.errors import JobDefinitionError


def env_with_parallelism(p: int) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(p)
    return env


def source(env):
    return env.from_source(CollectionSource([1, 2, 3]), WatermarkStrategy.no_watermarks(), "src")


def test_forward_connected_operators_of_equal_parallelism_share_one_vertex():
    env = env_with_parallelism(2)
    source(env).map(str).filter(bool).sink_to(PrintSink())
    graph = env.get_job_graph("chain")
    assert [v.name for v in graph.vertices] == ["src -> Map -> Filter -> Sink"]
    assert graph.edges == []


def test_key_by_splits_the_chain_with_a_hash_edge():
    env = env_with_parallelism(2)
    source(env).map(lambda x: (x, 1)).key_by(lambda t: t[0]).reduce(lambda a, b: a).print()
    graph = env.get_job_graph("keyed")
    assert [v.name for v in graph.vertices] == ["src -> Map", "Reduce -> Print"]
    assert [repr(e.partitioner) for e in graph.edges] == ["HASH"]


def test_changed_parallelism_without_partitioner_rebalances():
    env = env_with_parallelism(2)
    source(env).map(str).set_parallelism(3).print()
    graph = env.get_job_graph("rescale")
    assert [v.parallelism for v in graph.vertices] == [2, 3, 2]
    assert [repr(e.partitioner) for e in graph.edges] == ["REBALANCE", "REBALANCE"]


def test_broadcast_and_rebalance_are_explicit_edges():
    env = env_with_parallelism(2)
    source(env).broadcast().map(str).rebalance().print()
    graph = env.get_job_graph("edges")
    assert [repr(e.partitioner) for e in graph.edges] == ["BROADCAST", "REBALANCE"]


def test_forward_between_different_parallelism_is_rejected():
    env = env_with_parallelism(2)
    source(env).forward().map(str).set_parallelism(3).print()
    with pytest.raises(JobDefinitionError, match="equal parallelism"):
        env.get_job_graph("bad-forward")


def test_a_job_without_sink_is_rejected():
    env = env_with_parallelism(1)
    source(env).map(str)
    with pytest.raises(JobDefinitionError, match="no sink"):
        env.get_job_graph("no-sink")


def test_duplicate_uids_are_rejected():
    env = env_with_parallelism(1)
    source(env).map(str).uid("same").map(str).uid("same").print()
    with pytest.raises(JobDefinitionError, match="'same'"):
        env.get_job_graph("dup")


def test_derived_uids_are_the_same_for_the_same_pipeline():
    def build():
        env = env_with_parallelism(2)
        source(env).map(str).key_by(len).reduce(max).print()
        return env.get_job_graph("same").operator_uids()

    assert build() == build()


def test_given_uids_are_kept():
    env = env_with_parallelism(1)
    source(env).map(str).uid("to-text").print()
    assert "to-text" in env.get_job_graph("uids").operator_uids()


def test_input_channels_follow_the_partitioner():
    env = env_with_parallelism(2)
    source(env).map(str).set_parallelism(3).print()
    graph = env.get_job_graph("channels")
    mapper = graph.vertices[1]
    assert len(graph.input_channels(mapper.subtasks()[0])) == 2
    sink = graph.vertices[2]
    assert [up.subtask_index for _, up in graph.input_channels(sink.subtasks()[1])] == [0, 1, 2]


def test_uid_after_key_by_is_a_clear_error():
    env = env_with_parallelism(1)
    with pytest.raises(JobDefinitionError, match="operator"):
        source(env).key_by(str).uid("x")
