"""KafkaSource's readers driven directly against librdkafka's mock cluster (no Spark).

Splits are dealt as the JobMaster deals them (subtask i of p: splits i, i + p, ...); a
reader is polled until its input ends (bounded) or a state is reached, within a bound.
"""

from __future__ import annotations

import time

import pytest

from barrierflow.connectors.kafka import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaSource,
    KafkaTopicPartition,
)
from barrierflow.core.row import Row
from barrierflow.core.typeinfo import Types
from barrierflow.errors import ConfigurationError, SourceError
from barrierflow.serialization import JsonRowDeserializationSchema, SimpleStringSchema

pytest.importorskip("confluent_kafka")

BOUND_S = 20.0


def builder(cluster, **properties):
    out = KafkaSource.builder().set_bootstrap_servers(cluster.bootstrap_servers)
    return out.set_value_only_deserializer(SimpleStringSchema()).set_properties(properties)


OPEN: list = []
"""Readers of the running test, closed after it (no consumer outlives the mock cluster)."""


@pytest.fixture(autouse=True)
def _close_readers():
    yield
    while OPEN:
        OPEN.pop().close()


def readers(source, parallelism=1, positions=None):
    splits = source.create_splits()
    out = [source.create_reader(splits[i::parallelism]) for i in range(parallelism)]
    OPEN.extend(out)
    for reader in out:
        reader.restore(positions or {})
    return out


def drain(reader, max_records=1000, stop_after=None):
    """Poll `reader` until its input ends (or `stop_after` records came): the batches."""
    batches, count = [], 0
    deadline = time.monotonic() + BOUND_S
    while stop_after is None or count < stop_after:
        batch = reader.poll_split_batch(max_records)
        if batch is None:
            break
        if batch.records or batch.finished or batch.bad:
            batches.append(batch)
            count += len(batch.records)
        assert time.monotonic() < deadline, f"stalled after {count} record(s)"
    return batches


def values(batches):
    return sorted(v for b in batches for v in b.records)


@pytest.fixture
def topic(kafka_cluster):
    name = kafka_cluster.create_topic(kafka_cluster.fresh_name("in"), 3)
    for partition in range(3):
        kafka_cluster.produce(
            name, [f"p{partition}-{i}" for i in range(4)], partition, timestamp=1000 + partition
        )
    return name


ALL = sorted(f"p{p}-{i}" for p in range(3) for i in range(4))


def test_bounded_readers_read_every_partition_once_with_record_timestamps(kafka_cluster, topic):
    source = (
        builder(kafka_cluster)
        .set_topics(topic)
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    first, second = readers(source, 2)
    batches = drain(first) + drain(second)
    assert values(batches) == ALL
    finished = sorted(b.split_id for b in batches if b.finished)
    assert finished == [f"{topic}-{p}" for p in range(3)]
    for batch in batches:
        if batch.records:
            partition = int(batch.split_id.rsplit("-", 1)[1])
            assert batch.timestamps == [1000 + partition] * len(batch.records)
            assert all(v.startswith(f"p{partition}-") for v in batch.records)
    assert first.poll_split_batch(10) is None
    assert sorted(first.split_ids() + second.split_ids()) == finished  # partitions spread


def test_a_restore_at_another_parallelism_goes_on_from_the_checkpointed_offsets(
    kafka_cluster, topic
):
    source = (
        builder(kafka_cluster)
        .set_topics(topic)
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    first, second = readers(source, 2)
    before = drain(first, max_records=1, stop_after=3) + drain(second, max_records=1, stop_after=2)
    positions = {**first.snapshot(), **second.snapshot()}  # the checkpoint
    first.close()
    second.close()
    (alone,) = readers(source, 1, positions)
    after = drain(alone)
    alone.close()
    assert sorted(values(before) + values(after)) == ALL


@pytest.mark.parametrize(
    ("start", "expected"),
    [
        (KafkaOffsetsInitializer.earliest(), ALL),
        (KafkaOffsetsInitializer.latest(), []),
        (
            KafkaOffsetsInitializer.offsets({KafkaTopicPartition("T", 1): 3}),
            ["p1-3"],  # the others: the reset strategy's default is not EARLIEST here
        ),
    ],
    ids=["earliest", "latest", "offsets"],  # timestamp(): the mock cluster cannot look one up
)
def test_starting_offsets(kafka_cluster, topic, start, expected):
    if start.kind == "offsets":
        start = KafkaOffsetsInitializer.offsets(
            {KafkaTopicPartition(topic, 1): 3}, KafkaOffsetResetStrategy.LATEST
        )
    source = (
        builder(kafka_cluster)
        .set_topics(topic)
        .set_starting_offsets(start)
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    (reader,) = readers(source)
    assert values(drain(reader)) == expected
    reader.close()


def test_set_partitions_reads_only_the_partitions_given(kafka_cluster, topic):
    source = (
        builder(kafka_cluster)
        .set_partitions([KafkaTopicPartition(topic, 2), KafkaTopicPartition(topic, 0)])
        .set_starting_offsets(KafkaOffsetsInitializer.earliest())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    assert source.discovery_interval_s is None  # a fixed assignment: nothing to discover
    first, second = readers(source, 2)
    batches = drain(first) + drain(second)
    assert values(batches) == [v for v in ALL if not v.startswith("p1-")]
    assert sorted(first.split_ids() + second.split_ids()) == [f"{topic}-0", f"{topic}-2"]


def test_a_json_row_deserialization_schema_makes_rows_of_the_values(kafka_cluster):
    name = kafka_cluster.create_topic(kafka_cluster.fresh_name("json"), 1)
    kafka_cluster.produce(name, [b'{"word": "a", "count": 1}', b'{"count": 2, "word": "b"}'])
    schema = (
        JsonRowDeserializationSchema.builder()
        .type_info(Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()]))
        .build()
    )
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_topics(name)
        .set_value_only_deserializer(schema)
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    (reader,) = readers(source)
    records = [v for b in drain(reader) for v in b.records]
    assert records == [Row(word="a", count=1), Row(word="b", count=2)]
    assert [r.word for r in records] == ["a", "b"]


def test_offsets_go_to_the_group_when_a_checkpoint_completes(kafka_cluster, topic):
    group = kafka_cluster.fresh_name("group")
    source = builder(kafka_cluster).set_topics(topic).set_group_id(group).build()
    (reader,) = readers(source)
    drain(reader, stop_after=len(ALL))
    reader.notify_checkpoint_complete(1, reader.snapshot())
    committed = (
        builder(kafka_cluster)
        .set_topics(topic)
        .set_group_id(group)
        .set_starting_offsets(KafkaOffsetsInitializer.committed_offsets())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    deadline = time.monotonic() + BOUND_S
    while True:  # the commit is asynchronous: wait until the group holds it
        try:
            starts = {
                k: v for s in committed.create_splits() for k, v in s.payload["start"].items()
            }
        except SourceError:
            starts = {}
        if starts and all(offset == 4 for offset in starts.values()):
            break
        assert time.monotonic() < deadline, f"the group's offsets stayed at {starts}"
    reader.close()


def test_the_whole_record_is_reachable_key_and_headers_included(kafka_cluster):
    name = kafka_cluster.create_topic(kafka_cluster.fresh_name("keyed"), 1)
    kafka_cluster.produce(name, [b"v"], key=b"k", headers=[("h", b"1")], timestamp=77)
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_topics(name)
        .set_deserializer(lambda r: (r.topic, r.partition, r.offset, r.key, r.value, r.headers))
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    (reader,) = readers(source)
    records = [v for b in drain(reader) for v in b.records]
    assert records == [(name, 0, 0, b"k", b"v", (("h", b"1"),))]
    reader.close()


def test_an_undecodable_record_is_reported_with_its_partition_and_offset(kafka_cluster):
    name = kafka_cluster.create_topic(kafka_cluster.fresh_name("bad"), 1)
    kafka_cluster.produce(name, [b"ok", b"\xff", b"fine"])
    source = builder(kafka_cluster).set_topics(name).set_dead_letters()
    source = source.set_bounded(KafkaOffsetsInitializer.latest()).build()
    assert source.dead_letters
    (reader,) = readers(source)
    batches = drain(reader)
    assert values(batches) == ["fine", "ok"]
    (bad,) = [b for batch in batches for b in batch.bad]
    assert (bad.split_id, bad.offset, bad.raw) == (f"{name}-0", 1, b"\xff")
    assert bad.error.startswith("UnicodeDecodeError")
    assert reader.snapshot() == {f"{name}-0": 3}  # the bad record counts as read
    reader.close()


def test_a_record_the_deserializer_makes_none_is_skipped_and_counts_as_read(kafka_cluster):
    name = kafka_cluster.create_topic(kafka_cluster.fresh_name("skip"), 1)
    kafka_cluster.produce(name, [b"keep", b"drop", b"also"])
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_topics(name)
        .set_value_only_deserializer(lambda v: None if v == b"drop" else v.decode())
        .set_bounded(KafkaOffsetsInitializer.latest())
        .build()
    )
    (reader,) = readers(source)
    assert values(drain(reader)) == ["also", "keep"]
    assert reader.snapshot() == {f"{name}-0": 3}


def test_a_topic_created_while_running_is_found_by_the_pattern(kafka_cluster):
    prefix = kafka_cluster.fresh_name("found")
    kafka_cluster.create_topic(f"{prefix}-a", 1)
    kafka_cluster.produce(f"{prefix}-a", ["a0"])
    source = (
        builder(kafka_cluster, **{"partition.discovery.interval.ms": 50})
        .set_topic_pattern(f"{prefix}-.*")
        .build()
    )
    (reader,) = readers(source)
    assert values(drain(reader, stop_after=1)) == ["a0"]
    kafka_cluster.create_topic(f"{prefix}-b", 2)
    kafka_cluster.produce(f"{prefix}-b", ["b1"], partition=1)
    assert values(drain(reader, stop_after=1)) == ["b1"]
    assert reader.snapshot() == {f"{prefix}-a-0": 1, f"{prefix}-b-0": -2, f"{prefix}-b-1": 1}
    reader.close()


def test_a_missing_topic_or_bad_configuration_is_refused_before_the_job_runs(kafka_cluster):
    source = builder(kafka_cluster).set_topics(kafka_cluster.fresh_name("absent")).build()
    with pytest.raises(SourceError, match=r"Kafka topic\(s\) 'absent-\w+' not found"):
        source.create_splits()
    with pytest.raises(ConfigurationError, match="exactly one of set_topics"):
        builder(kafka_cluster).build()
    with pytest.raises(ConfigurationError, match="set_value_only_deserializer"):
        KafkaSource.builder().set_bootstrap_servers("x:1").set_topics("t").build()
    with pytest.raises(ConfigurationError, match="committed_offsets\\(\\) needs set_group_id"):
        builder(kafka_cluster).set_topics("t").set_starting_offsets(
            KafkaOffsetsInitializer.committed_offsets()
        ).build()
    with pytest.raises(ConfigurationError, match="bad Kafka topic pattern"):
        builder(kafka_cluster).set_topic_pattern("(")
