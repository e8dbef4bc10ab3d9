"""KafkaSink EXACTLY_ONCE: transactional ids no subtask of the new run owns are fenced at start.

Driven against librdkafka's mock cluster (no Spark). A transaction a dead subtask left open
under `<prefix>-k` ends when a producer initializes that id (`init_transactions`: the
broker aborts it and fences the zombie). The mock cluster neither aborts nor fences, so the
tests watch the initializations themselves: each transactional id gets its own coordinator
broker, and the brokers count the InitProducerId requests they receive.
"""

from __future__ import annotations

import pytest
from support.kafka_cluster import start_kafka_cluster, string_sink_builder

from barrierflow.connectors import DeliveryGuarantee, SinkContext
from barrierflow.connectors.kafka import KafkaSink
from barrierflow.errors import ConfigurationError

pytest.importorskip("confluent_kafka")

IDS = 8
"""Transactional ids watched: `<prefix>-k` is coordinated by broker k + 1."""
INIT_PRODUCER_ID = 22
"""The Kafka API key of InitProducerId (what `init_transactions` sends the coordinator)."""


@pytest.fixture(scope="module")
def cluster():
    with start_kafka_cluster(IDS) as out:
        yield out


@pytest.fixture
def setup(cluster):
    out = cluster.create_topic(cluster.fresh_name("out"), 2)
    markers = cluster.create_topic(cluster.fresh_name("markers"), 1)
    prefix = cluster.fresh_name("tx")
    for k in range(IDS):
        cluster.set_coordinator(f"{prefix}-{k}", k + 1)
    return out, markers, prefix


SINKS: list = []


@pytest.fixture(autouse=True)
def _close_sinks():
    yield
    while SINKS:
        sink = SINKS.pop()
        if getattr(sink, "_log", None) is not None:
            sink.close()


def writer(
    cluster, setup, subtask, parallelism, restored=None, max_parallelism=0, limit=None, attempt=0
):
    out, markers, prefix = setup
    builder = string_sink_builder(
        cluster.bootstrap_servers, out, prefix, DeliveryGuarantee.EXACTLY_ONCE
    ).set_commit_marker_topic(markers)
    if limit is not None:
        builder.set_transactional_id_probe_limit(limit)
    sink = builder.build()
    SINKS.append(sink)
    context = SinkContext(
        "counts",
        subtask,
        parallelism,
        attempt,
        f"d{attempt}",
        "job",
        restored,
        lineage="lin1",
        max_parallelism=max_parallelism,
    )
    return sink.create_writer(context)


def zombie(cluster, setup, k):
    """A producer of `<prefix>-k` that began a transaction, wrote to it and died."""
    from confluent_kafka import Producer

    _, _, prefix = setup
    elsewhere = cluster.create_topic(cluster.fresh_name("zombie"), 1)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"{prefix}-{k}"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(elsewhere, b"left open")
    producer.flush(30)
    return producer


def initialized(cluster):
    """The ids whose coordinator received InitProducerId since the last call."""
    return sorted(broker - 1 for broker in cluster.requests_per_broker(INIT_PRODUCER_ID))


def test_a_restore_at_a_lower_parallelism_fences_every_old_subtasks_id(cluster, setup):
    states = []
    for subtask, records in ((0, ["a", "b"]), (1, []), (2, ["c"])):
        old = writer(cluster, setup, subtask, 3)
        old.restore([])
        old.write_batch(records)
        old.pre_commit(1)
        states.append(old.snapshot_state())
        if subtask == 0:
            old.commit(1)  # checkpoint 1 completed; subtasks 1 and 2 died before their commit
    lingering = zombie(cluster, setup, 1)  # subtask 1's id, nothing pending in its state
    initialized(cluster)

    alone = writer(cluster, setup, 0, 1, restored=1)
    alone.restore(states)
    assert initialized(cluster) == [0, 1, 2]  # no probe here: the job's max parallelism is 0
    alone.write_batch(["d"])
    alone.pre_commit(2)
    alone.commit(2)
    alone.close()
    assert sorted(cluster.read(setup[0])) == ["a", "b", "c", "d"]
    lingering.abort_transaction(30)


# (probe limit, max parallelism, ids initialized by a fresh start at parallelism 2)
PROBES = [
    (None, IDS, list(range(IDS))),  # default: up to the job's max parallelism
    (6, IDS, [0, 1, 2, 3, 4, 5]),
    (0, IDS, [0, 1]),  # turned off: each subtask's own id only
    (None, 0, [0, 1]),  # max parallelism unknown (a writer outside a job)
]


@pytest.mark.parametrize(("limit", "max_parallelism", "expected"), PROBES)
def test_a_fresh_start_fences_the_ids_an_earlier_higher_parallelism_left(
    cluster, setup, limit, max_parallelism, expected
):
    lingering = zombie(cluster, setup, 3)  # an earlier run at parallelism 4 died mid-commit
    initialized(cluster)
    writers = [
        writer(cluster, setup, i, 2, max_parallelism=max_parallelism, limit=limit) for i in range(2)
    ]
    for each in writers:
        each.restore([])
    assert initialized(cluster) == expected
    for i, each in enumerate(writers):
        each.write_batch([f"r{i}"])
        each.pre_commit(1)
        each.commit(1)
        each.close()
    assert sorted(cluster.read(setup[0])) == ["r0", "r1"]
    lingering.abort_transaction(30)


def test_a_bad_probe_limit_is_refused_when_the_sink_is_built():
    for bad in (-1, 2.5, "8", True):
        with pytest.raises(ConfigurationError, match="set_transactional_id_probe_limit takes"):
            KafkaSink.builder().set_transactional_id_probe_limit(bad)


def test_a_restore_of_a_checkpoint_older_than_a_higher_parallelism_run_fences_its_ids(
    cluster, setup
):
    states = []
    for subtask in (0, 1):  # a checkpoint at parallelism 2 ...
        old = writer(cluster, setup, subtask, 2)
        old.restore([])
        old.write_batch([f"r{subtask}"])
        old.pre_commit(1)
        states.append(old.snapshot_state())
    lingering = zombie(cluster, setup, 3)  # ... then a run at 4 that died mid-commit
    initialized(cluster)
    again = [writer(cluster, setup, i, 2, restored=1, max_parallelism=IDS) for i in (0, 1)]
    for i, each in enumerate(again):
        each.restore([states[i]])
    assert initialized(cluster) == list(range(IDS))
    for each in again:
        each.close()
    assert sorted(cluster.read(setup[0])) == ["r0", "r1"]
    lingering.abort_transaction(30)


def test_a_later_attempt_of_the_run_does_not_probe_again(cluster, setup):
    """The run's first deployment fenced the lingering ids and none of its subtasks uses
    them, so a failover restores its own ids only (the probe costs about a second)."""
    first = writer(cluster, setup, 0, 2, max_parallelism=IDS)
    first.restore([])
    first.write_batch(["a"])
    first.pre_commit(1)
    state = first.snapshot_state()  # checkpoint 1 completed, then the task died
    initialized(cluster)
    again = writer(cluster, setup, 0, 2, restored=1, max_parallelism=IDS, attempt=1)
    again.restore([state])
    assert initialized(cluster) == [0]
    again.close()
    assert cluster.read(setup[0]) == ["a"]
