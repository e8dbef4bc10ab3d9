"""Kafka source and sink throughput on librdkafka's mock cluster, next to the file
connectors, and the per-checkpoint cost of the Kafka sink (issue 25).

    .venv/bin/python benchmarks/kafka.py [--records 200000] [--bootstrap host:9092]

Drives the connectors' readers and writers directly on this thread (no Spark, no job), as
the task's mailbox thread would: a source reader polled in batches of 1,000 until its
bounded input ends; a sink writer given batches of 1,000 with a checkpoint (pre-commit,
then commit) every 10,000 records. Values are 100-byte strings. Without `--bootstrap` it
starts the mock cluster of tests/support/kafka_cluster.py, which keeps everything in one
process on loopback (no disk, no replication): real brokers are slower per record and
have real network latency per checkpoint.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from barrierflow.connectors import DeliveryGuarantee, SinkContext
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.connectors.kafka import (
    KafkaOffsetsInitializer,
    KafkaRecordSerializationSchema,
    KafkaSink,
    KafkaSource,
)

BATCH = 1000
INTERVAL = 10_000
PARTITIONS = 4


def value(i: int) -> str:
    return f"{i:010d}".ljust(100, "x")


def read_all(reader) -> int:
    reader.restore({})
    count = 0
    while True:
        batch = reader.poll_split_batch(BATCH)
        if batch is None:
            return count
        count += len(batch.records)


def timed(action) -> tuple[float, int]:
    start = time.perf_counter()
    count = action()
    return time.perf_counter() - start, count


def kafka_source_rate(bootstrap: str, topic: str) -> tuple[float, int]:
    source = (
        KafkaSource.builder()
        .set_bootstrap_servers(bootstrap)
        .set_topics(topic)
        .set_value_only_deserializer(bytes.decode)
        .set_bounded(KafkaOffsetsInitializer.latest())
        .set_property("fetch.wait.max.ms", 10)  # the mock cluster waits that long per fetch
        .build()
    )
    reader = source.create_reader(source.create_splits())
    try:
        return timed(lambda: read_all(reader))
    finally:
        reader.close()


def file_source_rate(path: Path) -> tuple[float, int]:
    source = FileSource.for_lines(str(path))
    reader = source.create_reader(source.create_splits())
    try:
        return timed(lambda: read_all(reader))
    finally:
        reader.close()


def write_all(sink, records: int, interval: int = INTERVAL) -> int:
    writer = sink.create_writer(SinkContext("bench", 0, 1, 0, "d", "bench", None))
    writer.restore([])
    checkpoint = 0
    for start in range(0, records, BATCH):
        writer.write_batch([value(i) for i in range(start, min(start + BATCH, records))])
        if (start + BATCH) % interval == 0:
            checkpoint += 1
            writer.pre_commit(checkpoint)
            writer.commit(checkpoint)
    checkpoint += 1
    writer.pre_commit(checkpoint)
    writer.commit(checkpoint)
    writer.close()
    return records


def kafka_sink(bootstrap: str, topic: str, markers: str, guarantee: DeliveryGuarantee) -> KafkaSink:
    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic(topic)
        .set_value_serialization_schema(str)
        .build()
    )
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap)
        .set_record_serializer(serializer)
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(f"bench-{time.time_ns()}")
        .set_commit_marker_topic(markers)
        .build()
    )


def checkpoint_cost(sink, records_per_checkpoint: int, checkpoints: int = 50) -> float:
    """Milliseconds per checkpoint (pre-commit and commit) of intervals of that many records."""
    writer = sink.create_writer(SinkContext("bench", 0, 1, 0, "d", "bench", None))
    writer.restore([])
    spent = 0.0
    for checkpoint in range(1, checkpoints + 1):
        writer.write_batch([value(i) for i in range(records_per_checkpoint)])
        start = time.perf_counter()
        writer.pre_commit(checkpoint)
        writer.commit(checkpoint)
        spent += time.perf_counter() - start
    writer.close()
    return spent / checkpoints * 1000


def run(bootstrap: str, create_topic, records: int) -> None:
    topic = create_topic(f"bench-in-{time.time_ns()}", PARTITIONS)
    markers = create_topic(f"bench-markers-{time.time_ns()}", 1)
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value(i).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(60)

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        lines = Path(folder) / "in.txt"
        lines.write_text("".join(value(i) + "\n" for i in range(records)))
        for name, rate in (
            ("FileSource.for_lines (1 file)", file_source_rate(lines)),
            (f"KafkaSource ({PARTITIONS} partitions)", kafka_source_rate(bootstrap, topic)),
        ):
            rows.append(("source", name, rate))
        sinks = [
            ("FileSink.for_rows (JSON Lines)", lambda: FileSink.for_rows(f"{folder}/out")),
        ]
        for guarantee in DeliveryGuarantee:
            out = create_topic(f"bench-out-{guarantee.name.lower()}-{time.time_ns()}", PARTITIONS)
            sinks.append(
                (
                    f"KafkaSink {guarantee.name}",
                    lambda out=out, g=guarantee: kafka_sink(bootstrap, out, markers, g),
                )
            )
        for name, make in sinks:
            rows.append(("sink", name, timed(lambda make=make: write_all(make(), records))))
        print(
            f"{records} records of 100 bytes, batches of {BATCH}, sinks checkpoint every {INTERVAL}"
        )
        for kind, name, (seconds, count) in rows:
            print(f"  {kind:6} {name:34} {count / seconds:>12,.0f} events/s")
        out = create_topic(f"bench-cost-{time.time_ns()}", PARTITIONS)
        print("KafkaSink EXACTLY_ONCE, per checkpoint (pre-commit + commit), mean of 50:")
        for per in (0, 100, 10_000):
            cost = checkpoint_cost(
                kafka_sink(bootstrap, out, markers, DeliveryGuarantee.EXACTLY_ONCE), per
            )
            print(f"  {per:>6} records in the interval: {cost:8.2f} ms")
        cost = checkpoint_cost(FileSink.for_rows(f"{folder}/cost"), 100)
        print(f"FileSink, per checkpoint of 100 records: {cost:8.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bootstrap", help="a real cluster (topics are created there)")
    args = parser.parse_args()
    if args.bootstrap:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": args.bootstrap})

        def create(name: str, partitions: int) -> str:
            admin.create_topics([NewTopic(name, partitions)])[name].result(60)
            return name

        run(args.bootstrap, create, args.records)
        return
    from support.kafka_cluster import start_kafka_cluster

    with start_kafka_cluster() as cluster:
        run(cluster.bootstrap_servers, cluster.create_topic, args.records)


if __name__ == "__main__":
    main()
