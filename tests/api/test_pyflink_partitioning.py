"""PyFlink's partitioning and chaining calls (issue 24 item 17): shuffle, rescale,
partition_custom route each record as a scenario table says; start_new_chain,
disable_chaining and env.disable_operator_chaining cut the chains of the job graph;
slot_sharing_group is kept as a name; an operator's own max parallelism bounds its
parallelism when the job is built."""

from __future__ import annotations

import pyarrow as pa
import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.errors import JobDefinitionError
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.partitioners import (
    CustomPartitioner,
    RescalePartitioner,
    ShufflePartitioner,
)


def vertex_names(env) -> list[str]:
    return [v.name for v in env.get_job_graph().vertices]


def edge_partitioners(env) -> list[str]:
    return [repr(e.partitioner) for e in env.get_job_graph().edges]


def chain(env, *marks):
    """Collection -> a -> b -> c -> Print, `marks` applied to the operators by name."""
    stream = env.from_collection([1, 2])
    for name in ("a", "b", "c"):
        stream = stream.map(lambda x: x).name(name)
        for target, method in marks:
            if target == name:
                getattr(stream, method)()
    stream.print()
    return env


@pytest.mark.parametrize(
    ("marks", "vertices"),
    [
        ((), ["Collection -> a -> b -> c -> Print"]),
        ((("b", "start_new_chain"),), ["Collection -> a", "b -> c -> Print"]),
        ((("b", "disable_chaining"),), ["Collection -> a", "b", "c -> Print"]),
        (
            (("a", "start_new_chain"), ("c", "start_new_chain")),
            ["Collection", "a -> b", "c -> Print"],
        ),
    ],
)
def test_chaining_calls_cut_the_chain_where_they_say(marks, vertices):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    assert vertex_names(chain(env, *marks)) == vertices


def test_the_environment_can_turn_chaining_off():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    assert env.is_chaining_enabled()
    env.disable_operator_chaining()
    assert not env.is_chaining_enabled()
    assert vertex_names(chain(env)) == ["Collection", "a", "b", "c", "Print"]


def test_a_sink_can_refuse_chaining():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.from_collection([1]).map(str).print().disable_chaining()
    assert vertex_names(env) == ["Collection -> Map", "Print"]


def test_partitioning_calls_set_the_edge():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    numbers = env.from_collection([1, 2, 3])
    numbers.shuffle().map(str).print()
    numbers.rescale().map(str).print()
    numbers.partition_custom(lambda key, n: key % n, lambda v: v).map(str).print()
    assert edge_partitioners(env) == ["SHUFFLE", "RESCALE", "CUSTOM"]


@pytest.mark.parametrize(
    ("records", "channels", "routed"),
    [
        ([0, 1, 2, 3, 4], 2, [(0, [0, 2, 4]), (1, [1, 3])]),
        ([5, 8, 11], 3, [(2, [5, 8, 11])]),
        ([7], 1, [(0, [7])]),
    ],
)
def test_partition_custom_routes_by_the_partitioners_answer(records, channels, routed):
    class Modulo:  # PyFlink's Partitioner shape: partition(key, num_partitions)
        def partition(self, key, num_partitions):
            return key % num_partitions

    partitioner = CustomPartitioner(Modulo(), lambda v: v)
    assert partitioner.route(records, channels) == routed
    stamps = [r * 10 for r in records]
    assert partitioner.route_with_timestamps(records, stamps, channels) == [
        (c, part, [r * 10 for r in part]) for c, part in routed
    ]


@pytest.mark.parametrize(
    ("answer", "error", "message"),
    [
        (2, ValueError, "returned partition 2, outside 0..1"),
        (-1, ValueError, "returned partition -1, outside 0..1"),
        ("0", TypeError, "returned '0', not a partition"),
    ],
)
def test_partition_custom_refuses_a_partition_it_cannot_send_to(answer, error, message):
    partitioner = CustomPartitioner(lambda key, n: answer, lambda v: v)
    with pytest.raises(error, match=message):
        partitioner.route([1], 2)


def test_partition_custom_is_refused_without_a_partitioner_when_defined():
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match="partition_custom needs a Partitioner"):
        env.from_collection([1]).partition_custom(3, lambda v: v)


def test_shuffle_sends_every_record_once_to_some_channel():
    records = list(range(2000))
    parts = ShufflePartitioner().route(records, 4)
    assert sorted(v for _, part in parts for v in part) == records
    assert {channel for channel, _ in parts} == {0, 1, 2, 3}  # 2000 records: all reached
    assert all(part == sorted(part) for _, part in parts)  # order kept per channel


def test_shuffle_and_rescale_split_columnar_batches_too():
    batch = ColumnarBatch(pa.record_batch({"n": list(range(100))}))
    parts = ShufflePartitioner().route_columnar(batch, 3)
    assert sorted(n for _, b in parts for n in b.data.column(0).to_pylist()) == list(range(100))
    rescaled = RescalePartitioner().route([1, 2, 3, 4], 2)
    assert rescaled == [(0, [1, 3]), (1, [2, 4])]


def test_slot_sharing_group_is_kept_as_a_name_and_changes_nothing():
    class Group:
        def get_name(self):
            return "heavy"

    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    a = env.from_collection([1]).map(str).slot_sharing_group("light")
    b = a.map(str).slot_sharing_group(Group())
    b.print()
    assert (a._transformation.slot_sharing_group, b._transformation.slot_sharing_group) == (
        "light",
        "heavy",
    )
    assert vertex_names(env) == ["Collection -> Map -> Map -> Print"]
    with pytest.raises(JobDefinitionError, match="slot_sharing_group needs a non-empty name"):
        a.slot_sharing_group("")


def test_an_operators_own_max_parallelism_bounds_its_parallelism():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(4)
    env.from_collection([1]).map(str).name("narrow").set_max_parallelism(2).print()
    with pytest.raises(JobDefinitionError, match="'narrow' has parallelism 4, above its own max"):
        env.get_job_graph()
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.from_collection([1]).map(str).set_max_parallelism(2).print()
    assert vertex_names(env) == ["Collection -> Map -> Print"]
    with pytest.raises(JobDefinitionError, match="an integer >= 1, got 0"):
        env.from_collection([1]).map(str).set_max_parallelism(0)
