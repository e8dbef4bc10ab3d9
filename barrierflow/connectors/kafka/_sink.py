"""KafkaSink: records to Kafka topics, with PyFlink's three delivery guarantees.

`NONE` produces as records come; `AT_LEAST_ONCE` also flushes at every barrier (no record
of a completed checkpoint is lost; a restart writes some again). `EXACTLY_ONCE` writes each
checkpoint interval's records in one Kafka transaction, committed when the checkpoint
completes. Flink resumes a pre-committed transaction after a crash by producer id and
epoch; librdkafka cannot, so this sink keeps what a pending transaction holds in its
checkpointed state instead, and writes it only at commit time, in one transaction with a
marker record naming it (`_transactions.py`). docs/connectors/kafka.md has the argument.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import Sink, SinkContext
from barrierflow.connectors.delivery_guarantee import DeliveryGuarantee
from barrierflow.connectors.kafka._client import (
    CLIENT_TIMEOUT_S,
    client_config,
    import_kafka,
    new_client,
)
from barrierflow.connectors.kafka._serialization import KafkaRecordSerializationSchema
from barrierflow.connectors.kafka._transactions import MarkerLog, fence_ids, transact
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.errors import ConfigurationError, SinkError

__all__ = ["DEFAULT_MARKER_TOPIC", "KafkaSink", "KafkaSinkBuilder"]

DEFAULT_MARKER_TOPIC = "barrierflow-kafka-commits"
"""Where EXACTLY_ONCE sinks write the marker of each committed transaction (create it with
one partition or a few, compacted or with long retention)."""


class KafkaSink(TwoPhaseCommitSink[Any]):
    """Writes records to Kafka; build it with `KafkaSink.builder()`."""

    def __init__(
        self,
        bootstrap_servers: str,
        serializer: KafkaRecordSerializationSchema,
        *,
        delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.NONE,
        transactional_id_prefix: str = "kafka-sink",
        properties: Mapping[str, Any] | None = None,
        marker_topic: str = DEFAULT_MARKER_TOPIC,
        dead_letter_topic: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        transactional_id_probe_limit: int | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.serializer = serializer.placed()
        self.delivery_guarantee = delivery_guarantee
        self.transactional_id_prefix = Sink.output_table(transactional_id_prefix)
        """Under `barrierflow chaos` each run's own (`<prefix>__chaos`), as its topic is."""
        self.properties = dict(properties or {})
        self.marker_topic = marker_topic
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock
        self.transactional_id_probe_limit = transactional_id_probe_limit
        """At every start, `<prefix>-k` for parallelism <= k < this is fenced (None: the
        job's max parallelism, which no earlier run's subtask index reached)."""

    @staticmethod
    def builder() -> KafkaSinkBuilder:
        return KafkaSinkBuilder()

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee is DeliveryGuarantee.EXACTLY_ONCE

    def describe(self) -> str:
        topic = self.serializer.topic or "chosen per record"
        return f"KafkaSink (topic {topic}, {self.delivery_guarantee.name})"

    def survives_fallback(self) -> bool:
        """EXACTLY_ONCE cannot take back committed records; the others promise less."""
        return not self.exactly_once

    def producer_config(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        return client_config(self.bootstrap_servers, self.properties, overrides)

    def prepare(self) -> None:
        """On the driver: the cluster answers and the fixed topic (and the marker topic)
        exist, or one line names what is missing."""
        kafka = import_kafka()
        client = new_client("Producer", self.producer_config({}), self.describe())
        try:
            topics = client.list_topics(timeout=CLIENT_TIMEOUT_S).topics
        except kafka.KafkaException as error:
            raise SinkError(f"{self.describe()}: cannot reach Kafka: {error}") from None
        needed = [t for t in (self.serializer.topic, self.dead_letter_topic) if t]
        if self.exactly_once:
            needed.append(self.marker_topic)
        missing = [t for t in needed if t not in topics]
        if missing:
            _ensure_topics(kafka, self.producer_config({}), missing, self.describe())

    def committed_output(self) -> list[Any] | None:
        """The values the topic holds, as text (read_committed; for `barrierflow chaos`)."""
        topic = self.serializer.topic
        if topic is None:
            return None
        from barrierflow.connectors.kafka._transactions import read_partition_values

        return read_partition_values(self.producer_config({}), topic, self.clock)

    # ---- the transaction steps -----------------------------------------------------------

    def open(self, context: SinkContext) -> None:
        self.context = context
        self._buffers: dict[int, list[list[Any]]] = {}
        self._next = 0
        self._plain: Any = None
        self._delivery_errors: list[str] = []
        self._log: MarkerLog | None = None
        self._committed: set[str] = set()
        """Transactions this object committed, or found committed (their marker)."""
        self._own: set[str] = set()
        """Transactions pre-committed by this attempt: no earlier attempt wrote them."""
        self._probed = False
        """The lingering transactional ids were fenced in this attempt."""
        if self.exactly_once:
            self._log = MarkerLog(self, context)

    def transactional_id(self, subtask: int) -> str:
        return f"{self.transactional_id_prefix}-{subtask}"

    def begin_transaction(self) -> Any:
        self._next += 1
        if not self.exactly_once:
            return self._next
        self._buffers[self._next] = []
        return {"tid": self.transactional_id(self.context.subtask_index), "open": self._next}

    def write(self, transaction: Any, records: list[Any]) -> None:
        out = self._buffers[transaction["open"]] if self.exactly_once else None
        for index, record in enumerate(records):
            try:
                topic, key, value = self.serializer.serialize(record)
            except Exception as error:
                topic, key, value = self._dead_letter(record, index, error)
            if out is not None:
                out.append([topic, key, value])
            else:
                self._produce_plain(topic, key, value)

    def pre_commit(self, transaction: Any, checkpoint_id: int) -> Any:
        if not self.exactly_once:
            if self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE and self._plain:
                left = self._plain.flush(CLIENT_TIMEOUT_S)
                if left:
                    raise SinkError(f"{self.describe()}: {left} record(s) not acknowledged")
            self._raise_delivery_errors()
            return None
        records = self._buffers.pop(transaction["open"])
        context = self.context
        name = (
            "/".join(
                (
                    context.job_name,
                    context.operator_uid,
                    context.lineage,
                    str(context.subtask_index),
                )
            )
            + f"/{checkpoint_id}"
        )
        pending = {"v": 1, "tid": transaction["tid"], "name": name, "records": records}
        self._own.add(name)
        if records:
            assert self._log is not None
            pending["marker_from"] = self._log.end_offset(transaction["tid"])
        return pending

    def commit(self, transaction: Any) -> None:
        if not self.exactly_once or not transaction["records"]:
            return
        if transaction["name"] in self._committed:
            return
        assert self._log is not None
        if transaction["name"] not in self._own and self._log.holds(transaction):
            self._committed.add(transaction["name"])  # restored, and committed before
            return
        transact(self._log.producer(transaction["tid"]), self, transaction)
        self._committed.add(transaction["name"])

    def abort(self, transaction: Any) -> None:
        if self.exactly_once and isinstance(transaction, dict) and "open" in transaction:
            self._buffers.pop(transaction["open"], None)
        # a pending transaction wrote nothing to Kafka yet: nothing to undo

    def recover_and_commit(self, transaction: Any) -> None:
        """A transaction of a completed checkpoint: committed before (its marker is in the
        marker topic, read_committed) or written now, in a new transaction of its
        transactional id (which first fences a zombie holding that id)."""
        self._fence_lingering()
        if not self.exactly_once or not transaction["records"]:
            return
        assert self._log is not None
        self.commit(transaction)  # a restored name: commit looks for its marker first

    def recover_and_abort(self, transaction: Any) -> None:
        """The open transaction of a restored subtask: its records come again. Fence its
        transactional id, so a zombie of that subtask can commit nothing more."""
        self._fence_lingering()
        if self.exactly_once and isinstance(transaction, dict):
            assert self._log is not None
            self._log.producer(transaction["tid"])

    def finish_recovery(self) -> None:
        """Fence the subtask's own transactional id (and the lingering ones, if no restored
        transaction did so yet)."""
        self._fence_lingering()
        if self.exactly_once:
            assert self._log is not None
            own = self.transactional_id(self.context.subtask_index)
            self._log.producer(own)
            self._log.release_others(own)

    def _fence_lingering(self) -> None:
        """At a run's first deployment, before anything restored is decided: fence the ids
        beyond this run's parallelism this subtask owns (`lingering_ids`), which an earlier
        run at a higher parallelism may have used (a fresh start, or a restore of a
        checkpoint older than that run), so a transaction one left open is aborted now, not
        at the broker's `transaction.timeout.ms`, and holds no marker check back. An id a
        restored state names is initialized again when its transactions are decided. Later
        attempts of the run skip it (about a second at the default limit): no subtask of
        this run uses those ids, so nothing can have opened one since."""
        if self.exactly_once and not self._probed and self.context.attempt == 0:
            self._probed = True
            fence_ids(self, self.lingering_ids())

    def lingering_ids(self) -> list[str]:
        """The ids beyond this run's parallelism this subtask fences at start: `<prefix>-k`
        for parallelism <= k < the probe limit, k = subtask (mod parallelism)."""
        context = self.context
        limit = self.transactional_id_probe_limit
        if limit is None:
            limit = context.max_parallelism
        first = context.subtask_index + context.parallelism
        return [self.transactional_id(k) for k in range(first, limit, context.parallelism)]

    def close(self) -> None:
        if self._plain is not None:
            self._plain.flush(CLIENT_TIMEOUT_S)
            self._plain = None
        if self._log is not None:
            self._log.close()
            self._log = None

    # ---- internals -----------------------------------------------------------------------

    def _dead_letter(self, record: Any, index: int, error: Exception) -> tuple[str, None, bytes]:
        text = f"{type(error).__name__}: {error}"
        if self.dead_letter_topic is None:
            raise SinkError(
                f"{self.describe()}: record {index} of the batch cannot be serialized: "
                f"{text}: {record!r:.200}"
            ) from error
        letter = {
            "sink": self.context.operator_uid,
            "row": repr(record),
            "error": text,
            "failed_at": self.context.clock.epoch_millis(),
        }
        return self.dead_letter_topic, None, json.dumps(letter).encode()

    def _produce_plain(self, topic: str, key: bytes | None, value: bytes) -> None:
        kafka = import_kafka()
        if self._plain is None:
            self._plain = kafka.Producer(self.producer_config({}))
        self._raise_delivery_errors()
        while True:
            try:
                self._plain.produce(topic, value=value, key=key, on_delivery=self._delivered)
                break
            except BufferError:  # librdkafka's queue is full: wait for deliveries
                self._plain.poll(0.1)
        self._plain.poll(0)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None and self.delivery_guarantee is DeliveryGuarantee.AT_LEAST_ONCE:
            self._delivery_errors.append(f"{message.topic()}: {error.str()}")

    def _raise_delivery_errors(self) -> None:
        if self._delivery_errors:
            first = self._delivery_errors[0]
            raise SinkError(f"{self.describe()}: a record was not delivered: {first}")


class KafkaSinkBuilder:
    """PyFlink's `KafkaSinkBuilder`."""

    def __init__(self) -> None:
        self._servers: str | None = None
        self._serializer: KafkaRecordSerializationSchema | None = None
        self._guarantee = DeliveryGuarantee.NONE
        self._prefix: str | None = None
        self._properties: dict[str, Any] = {}
        self._marker_topic = DEFAULT_MARKER_TOPIC
        self._dead_letter_topic: str | None = None
        self._clock: Clock = SYSTEM_CLOCK
        self._probe_limit: int | None = None

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSinkBuilder:
        self._servers = bootstrap_servers
        return self

    def set_delivery_guarantee(self, delivery_guarantee: DeliveryGuarantee) -> KafkaSinkBuilder:
        if not isinstance(delivery_guarantee, DeliveryGuarantee):
            raise ConfigurationError(
                f"KafkaSink: set_delivery_guarantee takes a DeliveryGuarantee, not "
                f"{delivery_guarantee!r}"
            )
        self._guarantee = delivery_guarantee
        return self

    def set_transactional_id_prefix(self, transactional_id_prefix: str) -> KafkaSinkBuilder:
        """The transactional ids of EXACTLY_ONCE are `<prefix>-<subtask>`: keep it stable
        across restarts and unique per sink on the cluster."""
        self._prefix = transactional_id_prefix
        return self

    def set_record_serializer(
        self, record_serializer: KafkaRecordSerializationSchema
    ) -> KafkaSinkBuilder:
        if not isinstance(record_serializer, KafkaRecordSerializationSchema):
            raise ConfigurationError(
                "KafkaSink: set_record_serializer takes a KafkaRecordSerializationSchema "
                "(KafkaRecordSerializationSchema.builder()...build())"
            )
        self._serializer = record_serializer
        return self

    def set_property(self, key: str, value: Any) -> KafkaSinkBuilder:
        """A librdkafka producer setting (SASL, SSL, `acks`, ...), passed as it is."""
        self._properties[str(key)] = value
        return self

    def set_commit_marker_topic(self, topic: str) -> KafkaSinkBuilder:
        """Where EXACTLY_ONCE writes its commit markers (default `barrierflow-kafka-commits`)."""
        self._marker_topic = topic
        return self

    def set_dead_letter_topic(self, topic: str) -> KafkaSinkBuilder:
        """Records the serializer raises on go to `topic` as JSON (`sink`, `row`, `error`,
        `failed_at`), in the same transaction, instead of failing the job."""
        self._dead_letter_topic = topic
        return self

    def set_transactional_id_probe_limit(self, limit: int) -> KafkaSinkBuilder:
        """EXACTLY_ONCE: at every start, fence the transactional ids `<prefix>-k` for this
        run's parallelism <= k < `limit` (spread over the subtasks), so transactions an
        earlier run at a higher parallelism left open are aborted at once. Default: the
        job's max parallelism; 0 turns it off."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ConfigurationError(
                f"KafkaSink: set_transactional_id_probe_limit takes an int >= 0, not {limit!r}"
            )
        self._probe_limit = limit
        return self

    def set_clock(self, clock: Clock) -> KafkaSinkBuilder:
        self._clock = clock
        return self

    def build(self) -> KafkaSink:
        if not self._servers:
            raise ConfigurationError("KafkaSink: set_bootstrap_servers(...) is required")
        if self._serializer is None:
            raise ConfigurationError("KafkaSink: set_record_serializer(...) is required")
        exactly_once = self._guarantee is DeliveryGuarantee.EXACTLY_ONCE
        if exactly_once and not self._prefix:
            raise ConfigurationError(
                "KafkaSink: EXACTLY_ONCE needs set_transactional_id_prefix(...), stable across "
                "restarts and unique per sink on the cluster"
            )
        for key in ("transactional.id", "enable.idempotence"):
            if key in self._properties and exactly_once:
                raise ConfigurationError(
                    f"KafkaSink: {key!r} is set by the sink itself for EXACTLY_ONCE"
                )
        return KafkaSink(
            self._servers,
            self._serializer,
            delivery_guarantee=self._guarantee,
            transactional_id_prefix=self._prefix or "kafka-sink",
            properties=self._properties,
            marker_topic=self._marker_topic,
            dead_letter_topic=self._dead_letter_topic,
            clock=self._clock,
            transactional_id_probe_limit=self._probe_limit,
        )


def _ensure_topics(kafka: Any, config: dict[str, Any], names: list[str], what: str) -> None:
    """Ask for the missing topics' metadata through a producer, which makes a cluster that
    creates topics on first use (and the mock cluster) create them; still missing: one line
    naming them."""
    producer = kafka.Producer(config)
    for name in names:
        with contextlib.suppress(kafka.KafkaException):
            producer.list_topics(name, timeout=CLIENT_TIMEOUT_S)
    present = producer.list_topics(timeout=CLIENT_TIMEOUT_S).topics
    still = [n for n in names if n not in present or present[n].error is not None]
    if still:
        raise SinkError(f"{what}: Kafka topic(s) {', '.join(map(repr, still))} do not exist")
