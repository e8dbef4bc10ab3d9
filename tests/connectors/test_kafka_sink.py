"""KafkaSink's writers driven directly against librdkafka's mock cluster (no Spark).

EXACTLY_ONCE is checked at each crash point of its two-phase commit, one by one: a writer
is abandoned there (a killed task: no abort, its producer still alive as a zombie) and a
new writer restores the state the job would restore, then the replay is written. The
topic must end holding every record exactly once. (The mock cluster shows uncommitted
records to read_committed readers: the topic is read after the writers are done.)
"""

from __future__ import annotations

import json

import pytest
from support.kafka_cluster import string_sink_builder

from barrierflow.connectors import DeliveryGuarantee, SinkContext
from barrierflow.connectors.kafka import (
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaTopicSelector,
)
from barrierflow.errors import ConfigurationError, SinkError

pytest.importorskip("confluent_kafka")


def make_sink(cluster, topic: str, prefix: str, guarantee=DeliveryGuarantee.EXACTLY_ONCE, **kw):
    builder = string_sink_builder(
        cluster.bootstrap_servers, topic, prefix, guarantee, kw.pop("value", None)
    ).set_commit_marker_topic(kw.pop("markers"))
    if "dead_letters" in kw:
        builder.set_dead_letter_topic(kw.pop("dead_letters"))
    return builder.build()


WRITERS: list = []
"""Writers of the running test, the abandoned ones too (closed after it, so no client
outlives the mock cluster)."""


def writer_of(sink, subtask=0, parallelism=1, attempt=0, restored=None):
    context = SinkContext("counts", subtask, parallelism, attempt, f"d{attempt}", "job", restored)
    context = SinkContext(**{**context.__dict__, "lineage": "lin1"})
    WRITERS.append(sink)
    return sink.create_writer(context)


@pytest.fixture(autouse=True)
def _close_abandoned_writers():
    yield
    while WRITERS:
        sink = WRITERS.pop()
        if getattr(sink, "_log", None) is not None or getattr(sink, "_plain", None) is not None:
            sink.close()


@pytest.fixture
def topics(kafka_cluster):
    out = kafka_cluster.create_topic(kafka_cluster.fresh_name("out"), 2)
    markers = kafka_cluster.create_topic(kafka_cluster.fresh_name("markers"), 1)
    return out, markers, kafka_cluster.fresh_name("tx")


CRASH_POINTS = [
    # (crash point, what the job restores, what the source replays after it)
    ("before pre-commit", "checkpoint 1", ["c", "d"]),
    ("after pre-commit, before the checkpoint completes", "checkpoint 1", ["c", "d"]),
    ("after the checkpoint completed, before the commit", "checkpoint 2", []),
    ("after the commit, before it was acknowledged", "checkpoint 2", []),
]


@pytest.mark.parametrize(
    ("crash", "restores", "replay"), CRASH_POINTS, ids=[c[0] for c in CRASH_POINTS]
)
def test_each_crash_point_ends_with_every_record_once(
    kafka_cluster, topics, crash, restores, replay
):
    out, markers, prefix = topics
    first = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers))
    first.restore([])
    first.write_batch(["a", "b"])
    first.pre_commit(1)
    states = {"checkpoint 1": first.snapshot_state()}
    first.commit(1)
    first.write_batch(["c", "d"])
    if crash != "before pre-commit":
        first.pre_commit(2)
        states["checkpoint 2"] = first.snapshot_state()
    if crash == "after the commit, before it was acknowledged":
        first.commit(2)
    # the task dies here: no abort, no close; its producer lingers as a zombie

    again = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers), attempt=1)
    again.restore([states[restores]])
    again.write_batch([*replay, "e"])
    again.pre_commit(3)
    again.commit(3)
    again.close()

    assert sorted(kafka_cluster.read(out)) == ["a", "b", "c", "d", "e"]


def test_a_transaction_restored_twice_is_written_once(kafka_cluster, topics):
    out, markers, prefix = topics
    first = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers))
    first.restore([])
    first.write_batch(["a"])
    first.pre_commit(1)
    state = first.snapshot_state()  # checkpoint 1 completes, then the task dies
    for attempt in (1, 2):  # two restores of checkpoint 1 before the next checkpoint
        writer = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers), attempt=attempt)
        writer.restore([state])
    writer.pre_commit(2)
    writer.commit(2)
    writer.close()
    assert kafka_cluster.read(out) == ["a"]
    assert [json.loads(v)["records"] for v in kafka_cluster.read(markers)] == [1]


def test_rescaled_down_a_subtask_commits_what_another_left_pending(kafka_cluster, topics):
    out, markers, prefix = topics
    states = []
    for subtask, records in ((0, ["a", "b"]), (1, ["c"])):
        writer = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers), subtask, 2)
        writer.restore([])
        writer.write_batch(records)
        writer.pre_commit(1)
        states.append(writer.snapshot_state())
        if subtask == 0:
            writer.commit(1)  # subtask 0 committed, subtask 1 died before its commit
    alone = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers), 0, 1, attempt=1)
    alone.restore(states)
    alone.pre_commit(2)
    alone.commit(2)
    alone.close()
    assert sorted(kafka_cluster.read(out)) == ["a", "b", "c"]


def test_nothing_reaches_the_topic_before_its_checkpoint_completes(kafka_cluster, topics):
    out, markers, prefix = topics
    writer = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers))
    writer.restore([])
    writer.write_batch(["a"])
    writer.pre_commit(1)
    assert kafka_cluster.read(out, committed=False) == []
    writer.commit(1)
    writer.close()
    assert kafka_cluster.read(out) == ["a"]


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.NONE])
def test_without_transactions_records_are_written_as_they_come(kafka_cluster, topics, guarantee):
    out, markers, prefix = topics
    writer = writer_of(make_sink(kafka_cluster, out, prefix, guarantee, markers=markers))
    writer.restore([])
    writer.write_batch(["a", "b"])
    writer.pre_commit(1)  # AT_LEAST_ONCE flushes here
    if guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
        assert sorted(kafka_cluster.read(out)) == ["a", "b"]
    writer.commit(1)
    writer.close()
    assert sorted(kafka_cluster.read(out)) == ["a", "b"]


class ByLetter(KafkaTopicSelector):
    """Words starting with a vowel to one topic, the others to another."""

    def __init__(self, vowels: str, others: str) -> None:
        self.vowels, self.others = vowels, others

    def apply(self, data):
        return self.vowels if data[0][0] in "aeiou" else self.others


def test_a_topic_selector_and_a_key_schema_place_each_record(kafka_cluster, topics):
    _, markers, prefix = topics
    vowels = kafka_cluster.create_topic(kafka_cluster.fresh_name("vowels"), 1)
    others = kafka_cluster.create_topic(kafka_cluster.fresh_name("others"), 1)
    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic_selector(ByLetter(vowels, others))
        .set_key_serialization_schema(lambda pair: pair[0])
        .set_value_serialization_schema(lambda pair: str(pair[1]))
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_record_serializer(serializer)
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(prefix)
        .set_commit_marker_topic(markers)
        .build()
    )
    writer = writer_of(sink)
    writer.restore([])
    writer.write_batch([("apple", 1), ("pear", 2), ("egg", 3)])
    writer.pre_commit(1)
    writer.commit(1)
    writer.close()

    def placed(topic):
        return [(m.key(), m.value()) for m in kafka_cluster.messages(topic)]

    assert placed(vowels) == [(b"apple", b"1"), (b"egg", b"3")]
    assert placed(others) == [(b"pear", b"2")]


def test_an_unserializable_record_fails_naming_it_or_goes_to_the_dead_letter_topic(
    kafka_cluster, topics
):
    out, markers, prefix = topics

    def strict(value):
        if not isinstance(value, str):
            raise TypeError(f"not text: {value!r}")
        return value

    failing = writer_of(make_sink(kafka_cluster, out, prefix, markers=markers, value=strict))
    failing.restore([])
    with pytest.raises(SinkError, match=r"record 1 of the batch cannot be serialized: TypeError"):
        failing.write_batch(["a", 7])

    letters = kafka_cluster.create_topic(kafka_cluster.fresh_name("letters"), 1)
    sink = make_sink(
        kafka_cluster, out, prefix + "b", markers=markers, value=strict, dead_letters=letters
    )
    writer = writer_of(sink)
    writer.restore([])
    writer.write_batch(["a", 7])
    writer.pre_commit(1)
    writer.commit(1)
    writer.close()
    assert kafka_cluster.read(out) == ["a"]
    (letter,) = [json.loads(v) for v in kafka_cluster.read(letters)]
    assert (letter["sink"], letter["row"]) == ("counts", "7")
    assert letter["error"] == "TypeError: not text: 7"


def test_bad_configuration_is_refused_when_the_sink_is_built(kafka_cluster):
    serializer = (
        KafkaRecordSerializationSchema.builder().set_topic("t").set_value_serialization_schema(str)
    ).build()
    builder = KafkaSink.builder().set_bootstrap_servers("x:1").set_record_serializer(serializer)
    with pytest.raises(ConfigurationError, match="EXACTLY_ONCE needs set_transactional_id_prefix"):
        builder.set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE).build()
    with pytest.raises(ConfigurationError, match="set_value_serialization_schema"):
        KafkaRecordSerializationSchema.builder().set_topic("t").build()
    with pytest.raises(ConfigurationError, match="set_bootstrap_servers"):
        KafkaSink.builder().set_record_serializer(serializer).build()
