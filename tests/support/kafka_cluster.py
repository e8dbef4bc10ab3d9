"""A Kafka cluster for tests: librdkafka's built-in mock cluster, held by a subprocess.

No Kafka broker installs on these machines, but librdkafka (the library under
confluent-kafka) carries a mock cluster that speaks the Kafka protocol on loopback, with
topics, partitions, consumer groups, idempotent and transactional producers. It lives
inside the process whose client created it (`test.mock.num.brokers`), so the holder is a
small Python process of its own: it creates the cluster, prints the bootstrap address and
stays up until its stdin closes. Tests, the driver and Spark's Python workers all connect
to it over TCP like to a real cluster.

`kafka_cluster` (session scope, started only when a test asks for it) yields a
`KafkaCluster`; `start_kafka_cluster()` is the same as a context manager.
`KafkaCluster.create_topic`, `.produce` and `.read` set up input and read output
(`read` with `isolation.level=read_committed`). Tests using it are skipped when
confluent-kafka is missing (`pip install 'barrierflow[kafka]'`).

What the mock cluster does differently from a real broker is in docs/connectors/kafka.md;
the ones that matter to tests: it does not isolate transactions (a `read_committed`
consumer sees an open transaction's records, and an aborted one's) and does not fence a
producer whose transactional id a newer producer took over; so exactly-once is checked
after a job ended, and a test that needs an aborted transaction invisible cannot run here.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

START_TIMEOUT_S = 30.0
BROKERS = 1

# The holder: librdkafka's mock-cluster API through ctypes (confluent-kafka exposes only
# `test.mock.num.brokers`, whose topics all get 4 partitions, and the mock cluster has no
# controller, so the admin API cannot create topics). It prints the bootstrap address, then
# answers each line of its stdin: "topic NAME PARTITIONS" and "coordinator TRANSACTIONAL_ID
# BROKER" with the error code (0: done), "requests API_KEY" with "broker:count,..." of the
# requests of that kind the brokers received since the last "requests" ("-": none; the
# first one starts counting).
_HOLDER = r"""
import ctypes, glob, os, sys
import confluent_kafka
where = os.path.join(os.path.dirname(confluent_kafka.__file__), "..", "confluent_kafka.libs")
lib = ctypes.CDLL(sorted(glob.glob(os.path.join(where, "librdkafka*.so*")))[0])
pointer, text = ctypes.c_void_p, ctypes.c_char_p
lib.rd_kafka_conf_new.restype = pointer
lib.rd_kafka_conf_set.argtypes = [pointer, text, text, text, ctypes.c_size_t]
lib.rd_kafka_new.restype = pointer
lib.rd_kafka_new.argtypes = [ctypes.c_int, pointer, text, ctypes.c_size_t]
lib.rd_kafka_mock_cluster_new.restype = pointer
lib.rd_kafka_mock_cluster_new.argtypes = [pointer, ctypes.c_int]
lib.rd_kafka_mock_cluster_bootstraps.restype = text
lib.rd_kafka_mock_cluster_bootstraps.argtypes = [pointer]
lib.rd_kafka_mock_topic_create.argtypes = [pointer, text, ctypes.c_int, ctypes.c_int]
lib.rd_kafka_mock_coordinator_set.argtypes = [pointer, text, text, ctypes.c_int32]
lib.rd_kafka_mock_start_request_tracking.argtypes = [pointer]
lib.rd_kafka_mock_get_requests.restype = ctypes.POINTER(pointer)
lib.rd_kafka_mock_get_requests.argtypes = [pointer, ctypes.POINTER(ctypes.c_size_t)]
lib.rd_kafka_mock_request_id.restype = ctypes.c_int32
lib.rd_kafka_mock_request_id.argtypes = [pointer]
lib.rd_kafka_mock_request_api_key.restype = ctypes.c_int16
lib.rd_kafka_mock_request_api_key.argtypes = [pointer]
lib.rd_kafka_mock_request_destroy_array.argtypes = [ctypes.POINTER(pointer), ctypes.c_size_t]
lib.rd_kafka_mock_clear_requests.argtypes = [pointer]
error = ctypes.create_string_buffer(512)
conf = lib.rd_kafka_conf_new()
lib.rd_kafka_conf_set(conf, b"log_level", b"3", error, 512)
client = lib.rd_kafka_new(0, conf, error, 512)
cluster = lib.rd_kafka_mock_cluster_new(client, int(sys.argv[1]))
print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
tracking = False
for line in sys.stdin:  # up until the test session closes our stdin
    command, *args = line.split()
    if command == "topic":
        topic, partitions = args
        code = lib.rd_kafka_mock_topic_create(cluster, topic.encode(), int(partitions), 1)
    elif command == "coordinator":
        tid, broker = args
        code = lib.rd_kafka_mock_coordinator_set(cluster, b"transaction", tid.encode(), int(broker))
    else:  # "requests API_KEY": broker:count of that request since the last asking
        if not tracking:
            lib.rd_kafka_mock_start_request_tracking(cluster)
            tracking = True
        count = ctypes.c_size_t(0)
        requests = lib.rd_kafka_mock_get_requests(cluster, ctypes.byref(count))
        seen = {}
        for i in range(count.value):
            if lib.rd_kafka_mock_request_api_key(requests[i]) == int(args[0]):
                broker = lib.rd_kafka_mock_request_id(requests[i])
                seen[broker] = seen.get(broker, 0) + 1
        lib.rd_kafka_mock_request_destroy_array(requests, count.value)
        lib.rd_kafka_mock_clear_requests(cluster)
        code = ",".join(f"{b}:{n}" for b, n in sorted(seen.items())) or "-"
    print(code, flush=True)
"""


@dataclass
class KafkaCluster:
    """librdkafka's mock cluster on loopback, held by `process`."""

    bootstrap_servers: str
    process: subprocess.Popen
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def fresh_name(self, prefix: str = "t") -> str:
        """A topic (or group, or transactional id) name no test used before."""
        return f"{prefix}-{uuid.uuid4().hex[:10]}"

    def create_topic(self, name: str, partitions: int = 1) -> str:
        """Create `name` with `partitions` partitions (the mock cluster cannot add
        partitions later: a test of discovery makes a new topic matching a pattern)."""
        code = self._ask(f"topic {name} {partitions}")
        if code != "0":
            raise RuntimeError(f"the mock cluster did not create topic {name!r}: error {code}")
        return name

    def _ask(self, line: str) -> str:
        with self._lock:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
            return self.process.stdout.readline().strip()

    def set_coordinator(self, transactional_id: str, broker: int) -> None:
        """Make `broker` (1..brokers) the transaction coordinator of `transactional_id`."""
        code = self._ask(f"coordinator {transactional_id} {broker}")
        if code != "0":
            raise RuntimeError(f"the mock cluster refused coordinator {broker}: error {code}")

    def requests_per_broker(self, api_key: int) -> dict[int, int]:
        """How many requests of `api_key` each broker received since the last call (the
        first call starts counting). The mock cluster shows no request's content, so a test
        tells transactional ids apart by giving each its own coordinator broker."""
        answer = self._ask(f"requests {api_key}")
        if answer == "-":
            return {}
        pairs = (item.split(":") for item in answer.split(","))
        return {int(broker): int(count) for broker, count in pairs}

    def produce(
        self,
        topic: str,
        values: Iterable[Any],
        partition: int | None = None,
        key: Any = None,
        timestamp: int | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Write `values` (str or bytes) to `topic` and wait until every one is acknowledged."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "linger.ms": 0})
        extra: dict[str, Any] = {}
        if partition is not None:
            extra["partition"] = partition
        if timestamp is not None:
            extra["timestamp"] = timestamp
        if headers is not None:
            extra["headers"] = headers
        for value in values:
            producer.produce(topic, value=value, key=key, **extra)
        left = producer.flush(START_TIMEOUT_S)
        assert left == 0, f"{left} record(s) not acknowledged by the mock cluster"

    def read(self, topic: str, committed: bool = True) -> list[Any]:
        """Every record of `topic` now (values as str; `read_committed` unless told otherwise).

        Reads each partition to its end (its partition-EOF event), so it returns as soon as
        everything there is was read."""
        return [record.value().decode() for record in self.messages(topic, committed)]

    def messages(self, topic: str, committed: bool = True) -> list[Any]:
        """Every record of `topic` now, as confluent-kafka `Message`s, partition by partition."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        isolation = "read_committed" if committed else "read_uncommitted"
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": self.fresh_name("reader"),
                "enable.auto.commit": False,
                "isolation.level": isolation,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            metadata = consumer.list_topics(topic, timeout=START_TIMEOUT_S)
            partitions = sorted(metadata.topics[topic].partitions)
            # read to each partition's end: its EOF event comes after its last record
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            by_partition: dict[int, list[Any]] = {p: [] for p in partitions}
            open_partitions = set(partitions)
            while open_partitions:
                message = consumer.poll(START_TIMEOUT_S)
                assert message is not None, f"{topic} stalled at {sorted(open_partitions)}"
                error = message.error()
                if error is None:
                    by_partition[message.partition()].append(message)
                elif error.code() == KafkaError._PARTITION_EOF:
                    open_partitions.discard(message.partition())
                else:
                    raise RuntimeError(f"reading {topic}: {error}")
            out = [message for p in partitions for message in by_partition[p]]
            return out
        finally:
            consumer.close()

    def stop(self) -> None:
        process = self.process
        if process.poll() is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def string_sink_builder(
    bootstrap_servers: str, topic: str, prefix: str, guarantee: Any, value_schema: Any = None
) -> Any:
    """The `KafkaSink` builder the sink tests start from: string values (or `value_schema`)
    into `topic` under the transactional-id `prefix`, with `guarantee`."""
    from barrierflow.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink
    from barrierflow.serialization import SimpleStringSchema

    serializer = (
        KafkaRecordSerializationSchema.builder()
        .set_topic(topic)
        .set_value_serialization_schema(value_schema or SimpleStringSchema())
        .build()
    )
    return (
        KafkaSink.builder()
        .set_bootstrap_servers(bootstrap_servers)
        .set_record_serializer(serializer)
        .set_delivery_guarantee(guarantee)
        .set_transactional_id_prefix(prefix)
    )


@contextlib.contextmanager
def start_kafka_cluster(brokers: int = BROKERS) -> Iterator[KafkaCluster]:
    """librdkafka's mock cluster in a holder process of its own, stopped on exit."""
    pytest.importorskip(
        "confluent_kafka", reason="needs confluent-kafka (pip install 'barrierflow[kafka]')"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(brokers)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        address = _read_address(process)
        yield KafkaCluster(address, process)
    finally:
        KafkaCluster("", process).stop()


def _read_address(process: subprocess.Popen) -> str:
    """The holder's first line: the bootstrap address (blocks until printed or it exits)."""
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"the Kafka mock cluster holder exited with {process.wait()}")
    return line


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    with start_kafka_cluster() as cluster:
        yield cluster
