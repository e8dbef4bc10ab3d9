"""EXACTLY_ONCE's Kafka side: transactional producers per id, markers, and the marker check.

A pending transaction's records live in the sink's checkpointed state (the handle), not in
Kafka, until its checkpoint completes; then `transact` writes them and a marker record
(key: the transaction's name) in one Kafka transaction and commits it. The marker goes to a
partition of the marker topic chosen by the transactional id, so one subtask's markers are
in one partition, in commit order. `MarkerLog.holds` answers "did this transaction commit?"
from Kafka itself: after fencing the transactional id (a new producer's
`init_transactions` aborts what a zombie left open and stops it from committing), it reads
that partition with `read_committed`, from the offset the partition ended at when the
transaction was pre-committed (its marker cannot be earlier) to the end.
"""

from __future__ import annotations

import contextlib
import json
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from barrierflow._clock import Clock
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.kafka._client import CLIENT_TIMEOUT_S, import_kafka
from barrierflow.errors import SinkError, SinkUnavailableError, TransactionBusyError

__all__ = [
    "MARKER_WAIT_S",
    "PROBE_WAVE",
    "MarkerLog",
    "fence_ids",
    "read_partition_values",
    "transact",
]

MARKER_WAIT_S = 60.0
"""How long the marker check waits for the marker partition's last stable offset to reach
its end (another producer's open transaction holds read_committed readers back) before
calling the transaction busy; it is tried again on the writer's next call."""
POLL_S = 0.2
PROBE_WAVE = 16
"""Transactional ids `fence_ids` initializes at once (a producer, with its threads, each)."""


class MarkerLog:
    """The transactional producers of one sink writer and its view of the marker topic."""

    def __init__(self, sink: Any, context: SinkContext) -> None:
        self.sink = sink
        self.context = context
        self._producers: dict[str, Any] = {}
        self._partitions: int | None = None
        self._consumer: Any = None
        self._seen: dict[int, tuple[int, set[str]]] = {}
        """Per marker partition: (from offset, names of committed markers read from it)."""

    def producer(self, tid: str) -> Any:
        """The initialized transactional producer of `tid` (created on first use: its
        `init_transactions` fences every earlier producer of that id)."""
        producer = self._producers.get(tid)
        if producer is not None:
            return producer
        kafka = import_kafka()
        config = self.sink.producer_config(
            {"transactional.id": tid, "enable.idempotence": True, "linger.ms": 5}
        )
        producer = kafka.Producer(config)
        try:
            producer.init_transactions(CLIENT_TIMEOUT_S)
        except kafka.KafkaException as error:
            raise SinkUnavailableError(
                f"{self.sink.describe()}: cannot start transactional id {tid!r}: {error}"
            ) from None
        self._producers[tid] = producer
        self._seen.clear()  # fencing may have aborted what was open: read again
        return producer

    def forget(self, tid: str) -> None:
        self._producers.pop(tid, None)

    def release_others(self, own: str) -> None:
        """Drop the producers of other subtasks' ids (used only to recover their state)."""
        for tid in [t for t in self._producers if t != own]:
            self._producers.pop(tid)

    def partition(self, tid: str) -> int:
        """The marker partition of `tid`."""
        if self._partitions is None:
            metadata = self._reader().list_topics(self.sink.marker_topic, timeout=CLIENT_TIMEOUT_S)
            topic = metadata.topics.get(self.sink.marker_topic)
            if topic is None or topic.error is not None or not topic.partitions:
                raise SinkError(
                    f"{self.sink.describe()}: the commit marker topic "
                    f"{self.sink.marker_topic!r} does not exist"
                )
            self._partitions = len(topic.partitions)
        return zlib.crc32(tid.encode()) % self._partitions

    def end_offset(self, tid: str) -> int:
        """The marker partition's end now: a later commit's marker is at or after it."""
        kafka = import_kafka()
        tp = kafka.TopicPartition(self.sink.marker_topic, self.partition(tid))
        _, high = self._reader().get_watermark_offsets(tp, timeout=CLIENT_TIMEOUT_S)
        return int(high)

    def holds(self, transaction: dict[str, Any]) -> bool:
        """Whether `transaction` committed: its marker is in the marker partition, read
        with read_committed after fencing its transactional id."""
        tid = transaction["tid"]
        self.producer(tid)  # fence first: nothing of a zombie can commit after this
        partition = self.partition(tid)
        start = int(transaction.get("marker_from", 0))
        seen = self._seen.get(partition)
        if seen is None or seen[0] > start:
            seen = (start, self._read_names(partition, start))
            self._seen[partition] = seen
        return transaction["name"] in seen[1]

    def _read_names(self, partition: int, start: int) -> set[str]:
        kafka = import_kafka()
        consumer = self._reader()
        tp = kafka.TopicPartition(self.sink.marker_topic, partition, start)
        _, end = consumer.get_watermark_offsets(tp, timeout=CLIENT_TIMEOUT_S)
        names: set[str] = set()
        if end <= start:
            return names
        consumer.assign([tp])
        clock: Clock = self.context.clock
        deadline = clock.monotonic() + MARKER_WAIT_S
        position = start
        try:
            while position < end:
                message = consumer.poll(POLL_S)
                if clock.monotonic() > deadline:
                    raise TransactionBusyError(
                        f"{self.sink.describe()}: the commit markers of partition {partition} "
                        f"of {self.sink.marker_topic!r} stay behind an open transaction"
                    )
                if message is None:
                    continue
                error = message.error()
                if error is None:
                    if message.key() is not None:
                        names.add(message.key().decode())
                    position = message.offset() + 1
                elif error.code() == kafka.KafkaError._PARTITION_EOF:
                    position = max(position, message.offset())
                else:
                    raise SinkUnavailableError(
                        f"{self.sink.describe()}: reading the commit markers: {error.str()}"
                    )
        finally:
            consumer.unassign()
        return names

    def _reader(self) -> Any:
        if self._consumer is None:
            kafka = import_kafka()
            self._consumer = kafka.Consumer(
                self.sink.producer_config(
                    {
                        "group.id": f"{self.sink.transactional_id_prefix}-markers",
                        "enable.auto.commit": False,
                        "isolation.level": "read_committed",
                        "enable.partition.eof": True,
                        "fetch.wait.max.ms": 50,
                    }
                )
            )
        return self._consumer

    def close(self) -> None:
        self._producers.clear()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def fence_ids(sink: Any, tids: list[str]) -> None:
    """`init_transactions` on each of `tids`, `PROBE_WAVE` at a time, then let go of them.

    The broker aborts whatever transaction each id left open and fences its producers: what
    Flink's transaction aborter does with the ids beyond the current parallelism. librdkafka
    does not tell the producer epoch it got, so unlike Flink's probe this one cannot stop at
    the first id never used: it goes through every id it is given (the sink bounds them)."""
    if not tids:
        return
    kafka = import_kafka()

    def fence(tid: str) -> str | None:
        config = sink.producer_config({"transactional.id": tid, "enable.idempotence": True})
        producer = kafka.Producer(config)
        try:
            producer.init_transactions(CLIENT_TIMEOUT_S)
            return None
        except kafka.KafkaException as error:
            return f"{tid!r}: {error}"
        finally:
            close = getattr(producer, "close", None)  # confluent-kafka >= 2.13
            if close is not None:
                close()

    with ThreadPoolExecutor(PROBE_WAVE, thread_name_prefix="kafka-fence") as pool:
        failures = [f for f in pool.map(fence, tids) if f is not None]
    if failures:
        raise SinkUnavailableError(
            f"{sink.describe()}: cannot fence lingering transactional id {failures[0]}"
        )


def transact(producer: Any, sink: Any, transaction: dict[str, Any]) -> None:
    """Write `transaction`'s records and its marker in one Kafka transaction and commit it.

    A failure aborts what it can and raises `SinkError`: the task fails, and the restore's
    marker check decides whether the transaction committed (then it is not written again)."""
    kafka = import_kafka()
    name = transaction["name"]
    log = sink._log
    marker = json.dumps({"txn": name, "records": len(transaction["records"])}).encode()
    try:
        producer.begin_transaction()
        for topic, key, value in transaction["records"]:
            _produce(producer, topic, key, value, None)
        partition = log.partition(transaction["tid"])
        _produce(producer, sink.marker_topic, name.encode(), marker, partition)
        producer.commit_transaction(CLIENT_TIMEOUT_S)
    except kafka.KafkaException as exception:
        error = exception.args[0] if exception.args else None
        if error is not None and error.txn_requires_abort():
            with contextlib.suppress(kafka.KafkaException):
                producer.abort_transaction(CLIENT_TIMEOUT_S)
        else:  # fenced, or fatal: the producer is unusable
            log.forget(transaction["tid"])
        text = error.str() if error is not None else str(exception)
        raise SinkError(
            f"{sink.describe()}: committing transaction {name} failed: {text}"
        ) from None


def _produce(producer: Any, topic: str, key: Any, value: Any, partition: int | None) -> None:
    extra = {} if partition is None else {"partition": partition}
    while True:
        try:
            producer.produce(topic, value=value, key=key, **extra)
            return
        except BufferError:  # librdkafka's queue is full: let it send
            producer.poll(POLL_S)


def read_partition_values(config: dict[str, Any], topic: str, clock: Clock) -> list[Any]:
    """Every committed value of `topic` now, as text (for `barrierflow chaos`)."""
    kafka = import_kafka()
    consumer = kafka.Consumer(
        {
            **config,
            "group.id": "barrierflow-committed-output",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=CLIENT_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        partitions = sorted(metadata.partitions)
        consumer.assign(
            [kafka.TopicPartition(topic, p, kafka.OFFSET_BEGINNING) for p in partitions]
        )
        left = set(partitions)
        values: list[Any] = []
        deadline = clock.monotonic() + CLIENT_TIMEOUT_S
        while left:
            message = consumer.poll(POLL_S)
            if clock.monotonic() > deadline:
                raise SinkUnavailableError(f"reading Kafka topic {topic!r}: no end in sight")
            if message is None:
                continue
            error = message.error()
            if error is None:
                value = message.value()
                values.append(None if value is None else value.decode("utf-8", "backslashreplace"))
            elif error.code() == kafka.KafkaError._PARTITION_EOF:
                left.discard(message.partition())
        return values
    finally:
        consumer.close()
