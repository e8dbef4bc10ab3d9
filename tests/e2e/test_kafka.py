"""Kafka -> keyed running count -> Kafka (EXACTLY_ONCE) on Spark against librdkafka's mock
cluster (support/kafka_cluster.py): with a task killed mid-run (the counts also going into an
Iceberg table), and rescaled from 2 to 3 through a savepoint. Either way the output topic (and
the table) holds exactly what a failure-free run writes, every (word, n) once.

The input's first half is in the topic at the start and the second half is written later
(after the failover, or between the two runs); the source is bounded at offsets given up
front, so the job ends when all of it is read. The output is read after the job ended: the
mock cluster does not hide uncommitted records from read_committed readers.
"""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.iceberg_catalog import catalog_properties, table_rows

from barrierflow import StreamExecutionEnvironment, _fs
from barrierflow.connectors import DeliveryGuarantee
from barrierflow.connectors.iceberg import IcebergSink
from barrierflow.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
    KafkaTopicPartition,
)
from barrierflow.core.watermark_strategy import WatermarkStrategy

from .jobs import (
    DEPLOY_S,
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host

RECORDS = 4000
PARTITIONS = 4
COUNT_ROWS = pa.schema([("word", pa.string()), ("count", pa.int64())])


class Topics:
    """The input split by partition (word i in partition i mod 4), its halves, the output
    and marker topics, and the transactional id prefix of one test."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.words = [word_of(i) for i in range(RECORDS)]
        self.source = cluster.create_topic(cluster.fresh_name("words"), PARTITIONS)
        self.out = cluster.create_topic(cluster.fresh_name("counts"), 2)
        self.markers = cluster.create_topic(cluster.fresh_name("markers"), 1)
        self.prefix = cluster.fresh_name("counts-tx")
        self.parts = [self.words[p::PARTITIONS] for p in range(PARTITIONS)]

    def write_half(self, second: bool) -> None:
        for p, part in enumerate(self.parts):
            half = len(part) // 2
            self.cluster.produce(self.source, part[half:] if second else part[:half], p)

    def pipeline(self, env: StreamExecutionEnvironment, lake: dict[str, Any] | None = None) -> None:
        """The job; with `lake` (a catalog's properties) the counts also go into the
        Iceberg table db.counts."""
        ends = {KafkaTopicPartition(self.source, p): len(self.parts[p]) for p in range(PARTITIONS)}
        source = (
            KafkaSource.builder()
            .set_bootstrap_servers(self.cluster.bootstrap_servers)
            .set_topics(self.source)
            .set_value_only_deserializer(bytes.decode)
            .set_bounded(KafkaOffsetsInitializer.offsets(ends))
            .set_property("fetch.wait.max.ms", 20)  # the mock cluster waits that long
            .build()
        )
        serializer = (
            KafkaRecordSerializationSchema.builder()
            .set_topic(self.out)
            .set_value_serialization_schema(lambda pair: f"{pair[0]},{pair[1]}")
            .build()
        )
        sink = (
            KafkaSink.builder()
            .set_bootstrap_servers(self.cluster.bootstrap_servers)
            .set_record_serializer(serializer)
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .set_transactional_id_prefix(self.prefix)
            .set_commit_marker_topic(self.markers)
            .build()
        )
        words = env.from_source(source, WatermarkStrategy.no_watermarks(), "words").uid("words")
        counts = running_counts(words)
        counts.sink_to(sink).uid("out")
        if lake is not None:
            table = IcebergSink.for_table("db.counts", lake).with_schema(COUNT_ROWS)
            rows = counts.map(lambda pair: {"word": pair[0], "count": pair[1]}).uid("rows")
            rows.sink_to(table).uid("iceberg")

    def check_output(self) -> None:
        written = Counter(tuple(v.rsplit(",", 1)) for v in self.cluster.read(self.out))
        assert written == Counter((w, str(n)) for w, n in running_count_rows(self.words))


def records_by_vertex(url: str) -> dict[str, float]:
    """Records in plus out of each vertex in `/metrics` (summed over subtasks)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in (
                "barrierflow_task_records_in_total",
                "barrierflow_task_records_out_total",
            ):
                vertex = sample.labels["vertex"]
                out[vertex] = out.get(vertex, 0.0) + sample.value
    return out


def wait_for_records_in_metrics(job, timeout: float = 30) -> None:
    """Every vertex (the Kafka source's, the Kafka and Iceberg sinks' chains) shows records
    in `/metrics`, as every connector's vertex does (issue 25: "shown in metrics")."""
    names = [v.name for v in job.job_graph.vertices]
    deadline = time.monotonic() + timeout
    while True:
        seen = records_by_vertex(job.rest_url)
        if all(seen.get(name, 0.0) > 0 for name in names):
            return
        assert time.monotonic() < deadline, f"vertices without records in /metrics: {seen}"
        time.sleep(0.2)


def test_kafka_to_kafka_and_iceberg_exactly_once_survives_a_killed_task(
    spark, tmp_path, kafka_cluster
):
    topics = Topics(kafka_cluster)
    topics.write_half(second=False)
    lake = catalog_properties(tmp_path / "lake")
    env = recovering_environment(tmp_path / "checkpoints")
    topics.pipeline(env, lake)
    job = env.execute_async("kafka-count")
    if not job.wait_for_completed_checkpoints(2, timeout=DEPLOY_S):  # deploying on a busy machine
        if job.join(timeout=0):
            job.wait()  # the job ended: raises its error, if it failed
        raise AssertionError(f"no 2 checkpoints in {DEPLOY_S} s; the job is {job.get_job_status()}")
    wait_for_records_in_metrics(job)
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    job.inject_failure("executor", counting, 1)
    wait_for_attempt(job, 1, timeout=60)
    topics.write_half(second=True)  # the rest of the input, after the failover
    result = job.wait(timeout=DEPLOY_S)

    assert result.restarts >= 1
    topics.check_output()
    in_table = Counter((row["word"], row["count"]) for row in table_rows(lake, "db.counts"))
    assert in_table == running_count_rows(topics.words)


def test_a_kafka_job_rescaled_from_2_to_3_through_a_savepoint(spark, tmp_path, kafka_cluster):
    topics = Topics(kafka_cluster)
    topics.write_half(second=False)
    env = recovering_environment(tmp_path / "run-1")
    topics.pipeline(env)
    job = env.execute_async("kafka-rescale")
    assert job.wait_for_completed_checkpoints(1, timeout=DEPLOY_S)
    stopped = job.stop_with_savepoint(False, str(tmp_path / "sp"), timeout=120).result()
    job.wait(timeout=60)

    topics.write_half(second=True)
    env = recovering_environment(tmp_path / "run-2")
    env.set_parallelism(3)
    env.set_savepoint_restore_settings(_fs.Location(stopped).path)
    topics.pipeline(env)
    resumed = env.execute_async("kafka-rescale")
    resumed.wait(timeout=DEPLOY_S)

    assert resumed.restored_from is not None
    topics.check_output()
