"""Kafka -> keyed running count -> Kafka (EXACTLY_ONCE), with a task killed mid-run, on Spark
against librdkafka's mock cluster (support/kafka_cluster.py): the output topic holds exactly
what a failure-free run writes, every (word, n) once.

The input's first half is in the topic at the start, the second half is written once the job
has failed over (the source is bounded at offsets given up front), so the failure always
lands mid-run. The output is read after the job ended: the mock cluster does not hide
uncommitted records from read_committed readers.
"""

from __future__ import annotations

from collections import Counter

import pytest

from barrierflow.connectors import DeliveryGuarantee
from barrierflow.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
)
from barrierflow.core.watermark_strategy import WatermarkStrategy

from .jobs import (
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = pytest.mark.spark

RECORDS = 4000
PARTITIONS = 4


def test_kafka_to_kafka_exactly_once_survives_a_killed_task(spark, tmp_path, kafka_cluster):
    words = [word_of(i) for i in range(RECORDS)]
    source_topic = kafka_cluster.create_topic(kafka_cluster.fresh_name("words"), PARTITIONS)
    out = kafka_cluster.create_topic(kafka_cluster.fresh_name("counts"), 2)
    markers = kafka_cluster.create_topic(kafka_cluster.fresh_name("markers"), 1)
    by_partition = [words[p::PARTITIONS] for p in range(PARTITIONS)]
    half = [len(part) // 2 for part in by_partition]
    for p, part in enumerate(by_partition):
        kafka_cluster.produce(source_topic, part[: half[p]], partition=p)

    env = recovering_environment(tmp_path / "checkpoints")
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_topics(source_topic)
        .set_value_only_deserializer(bytes.decode)
        .set_bounded(
            KafkaOffsetsInitializer.offsets(
                {
                    KafkaTopicPartition(source_topic, p): len(by_partition[p])
                    for p in range(PARTITIONS)
                }
            )
        )
        .build()
    )
    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic(out)
        .set_value_serialization_schema(lambda pair: f"{pair[0]},{pair[1]}")
        .build()
    )
    sink = (
        KafkaSink.builder()
        .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
        .set_record_serializer(serializer)
        .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
        .set_transactional_id_prefix(kafka_cluster.fresh_name("counts-tx"))
        .set_commit_marker_topic(markers)
        .build()
    )
    words_in = env.from_source(source, WatermarkStrategy.no_watermarks(), "words").uid("words")
    running_counts(words_in).sink_to(sink).uid("out")
    job = env.execute_async("kafka-count")
    if not job.wait_for_completed_checkpoints(2, timeout=120):  # deploying on a busy machine
        raise AssertionError(f"no 2 checkpoints: {job.get_job_status()}: {job.wait(timeout=10)}")
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    job.inject_failure("executor", counting, 1)
    wait_for_attempt(job, 1, timeout=60)
    for p, part in enumerate(by_partition):  # the rest of the input, after the failure
        kafka_cluster.produce(source_topic, part[half[p] :], partition=p)
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    written = Counter(tuple(v.rsplit(",", 1)) for v in kafka_cluster.read(out))
    expected = Counter((w, str(n)) for w, n in running_count_rows(words))
    assert written == expected
