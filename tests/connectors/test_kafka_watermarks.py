"""KafkaSource's per-partition watermarks and idleness, event by event (no Spark).

A real `KafkaSource` reads librdkafka's mock cluster inside a `SourceOperator` driven by
hand with a manual processing-time clock, as a task's mailbox loop drives it: records are
produced to one partition at a time, the operator is polled until each has come out (a
state, bounded in real time), and the clock is moved to fire the periodic watermark. As
Flink's per-split watermarks do, a partition that gets nothing holds the subtask's
watermark back only until it is idle, and holds it back again once records come.
"""

from __future__ import annotations

import time

import pytest
from support.clocks import ManualClock
from support.operator_harness import fire_due, started_source

from barrierflow import Duration, WatermarkStrategy
from barrierflow.connectors.kafka import KafkaSource
from barrierflow.runtime.elements import StreamStatus
from barrierflow.serialization import SimpleStringSchema

pytest.importorskip("confluent_kafka")

BOUND_S = 20.0
IDLE_MS = 300
INTERVAL_MS = 100


def started(kafka_cluster, topic, clock):
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_topics(topic)
        .set_value_only_deserializer(SimpleStringSchema())
        .set_property("fetch.wait.max.ms", 20)  # the mock cluster waits that long for more
        .build()
    )
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0))
    strategy = strategy.with_idleness(Duration.of_millis(IDLE_MS))
    return started_source(source, clock, strategy=strategy, interval_ms=INTERVAL_MS)


def arrive(producer, operator, out, topic, partition, value, timestamp):
    """Produce one record and poll the operator until it came out: what came out with it."""
    producer.produce(topic, value=value, partition=partition, timestamp=timestamp)
    assert producer.flush(BOUND_S) == 0, f"{value!r} not acknowledged"
    seen = []
    deadline = time.monotonic() + BOUND_S
    while ("record", value, timestamp) not in seen:
        operator.emit_next(100)
        seen.extend(out.take())
        assert time.monotonic() < deadline, f"{value!r} never came out; saw {seen}"
    return seen


def test_an_idle_partition_stops_holding_the_watermark_back_until_it_has_records_again(
    kafka_cluster,
):
    topic = kafka_cluster.create_topic(kafka_cluster.fresh_name("idle"), 2)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "linger.ms": 0})
    clock = ManualClock()
    operator, out = started(kafka_cluster, topic, clock)
    try:
        # (clock ms, partition getting a record or None, its event time, expected output)
        scenario = [
            (0, 0, 1_000, []),  # partition 1 never had a record: it holds the watermark
            (100, None, None, []),
            (200, 0, 2_000, []),
            (300, None, None, [("watermark", 1_999)]),  # partition 1 quiet 300 ms: idle
            (400, 0, 3_000, [("watermark", 2_999)]),  # partition 0 alone decides
            (400, 1, 1_500, []),  # partition 1 is back, behind partition 0
            (500, 0, 4_000, []),  # held back at partition 1's 1_499 (never goes back)
            (600, 0, 5_000, []),
            (700, 1, 4_500, [("watermark", 4_499)]),  # partition 1 catches up
            (800, 1, 9_000, [("watermark", 4_999)]),  # the minimum of both again
        ]
        emitted = []
        for step, (now, partition, timestamp, expected) in enumerate(scenario):
            clock.now = now
            got = []
            if partition is not None:
                value = f"p{partition}@{timestamp}"
                got = arrive(producer, operator, out, topic, partition, value, timestamp)
                got = [e for e in got if e[0] != "record"]
            fire_due(operator, clock)
            got += out.take()
            emitted += got
            assert got == expected, f"step {step} at {now} ms"
        assert ("status", StreamStatus.IDLE) not in emitted  # partition 0 kept it active
    finally:
        operator.close()
