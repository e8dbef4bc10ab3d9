"""KafkaSource: Kafka topics read exactly once, each partition a split with its offset.

Ownership: a partition belongs to bucket `(crc32(topic) + partition) mod BUCKETS`, and the
source's splits are the BUCKETS buckets, dealt round-robin to its subtasks; a reader reads
the partitions of its buckets. So consecutive partitions of a topic go to consecutive
subtasks, a rescale moves whole partitions (each reader takes the positions of the
partitions it now owns from the union of the old snapshots), and a reader that discovers a
partition while it runs (a new topic matching `set_topic_pattern`) knows at once whether it
is its own, with no message to the driver.

On the driver, `create_splits` lists the partitions, refuses a missing topic or an
unreachable cluster, and resolves the starting (and, bounded, stopping) offsets into the
splits' payloads, so a restart never resolves `latest()` again. A checkpoint stores the next
offset of every partition a reader owns; a restore seeks there (exactly once by replay).
Partitions discovered later start at their earliest offset, as in Flink.
"""

from __future__ import annotations

import re
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import Source, SourceReader, SourceSplit
from barrierflow.connectors.kafka._client import (
    CLIENT_TIMEOUT_S,
    KafkaRecordDeserializationSchema,
    client_config,
    import_kafka,
    new_client,
)
from barrierflow.connectors.kafka._offsets import KafkaOffsetsInitializer, KafkaTopicPartition
from barrierflow.errors import ConfigurationError, SourceError

__all__ = ["BUCKETS", "KafkaSource", "KafkaSourceBuilder", "bucket_of"]

BUCKETS = 128
"""Ownership buckets: at most this many subtasks read one Kafka source."""
BUCKET_PREFIX = "kafka-bucket-"


def bucket_of(split_id: str) -> int:
    """The bucket of a partition's split id: consecutive partitions, consecutive buckets.

    >>> [bucket_of(f"orders-{p}") - bucket_of("orders-0") for p in range(3)]
    [0, 1, 2]
    """
    topic, _, partition = split_id.rpartition("-")
    return (zlib.crc32(topic.encode()) + int(partition)) % BUCKETS


class KafkaSource(Source):
    """Reads Kafka topics exactly once; build it with `KafkaSource.builder()`.

    Exactly once because each partition's next offset is in every checkpoint and a restore
    seeks there. Assumes the topics keep records until the job has read past them
    (retention that deletes unread records loses them), and that a transactional input is
    read with `isolation.level=read_committed` (`set_property`) when only committed
    records may enter.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        deserializer: KafkaRecordDeserializationSchema,
        *,
        topics: Sequence[str] = (),
        topic_pattern: str | None = None,
        partitions: Iterable[KafkaTopicPartition] = (),
        group_id: str | None = None,
        starting_offsets: KafkaOffsetsInitializer | None = None,
        stopping_offsets: KafkaOffsetsInitializer | None = None,
        bounded: bool = False,
        properties: Mapping[str, Any] | None = None,
        dead_letters: bool = False,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.deserializer = deserializer
        self.topics = list(topics)
        self.topic_pattern = topic_pattern
        self.partitions = sorted(set(partitions))
        self.group_id = group_id
        self.starting_offsets = starting_offsets or KafkaOffsetsInitializer.earliest()
        self.stopping_offsets = stopping_offsets
        self.bounded = bounded
        self.properties = dict(properties or {})
        self.dead_letters = dead_letters
        self.clock = clock
        """Where readers read time (the discovery interval): a test drives it by hand."""

    @staticmethod
    def builder() -> KafkaSourceBuilder:
        return KafkaSourceBuilder()

    @property
    def discovery_interval_s(self) -> float | None:
        """How often readers look for new partitions; None: never (bounded, fixed partitions,
        or `partition.discovery.interval.ms` <= 0). Flink's default: 5 minutes."""
        if self.stopping_offsets is not None or self.partitions:
            return None
        interval_ms = int(self.properties.get("partition.discovery.interval.ms", 300_000))
        return interval_ms / 1000.0 if interval_ms > 0 else None

    def consumer_config(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        group = self.group_id or self.properties.get("group.id") or "barrierflow-kafka-source"
        base = {"group.id": group, "enable.auto.commit": False, "enable.auto.offset.store": False}
        return client_config(self.bootstrap_servers, self.properties, {**base, **overrides})

    def matches(self, topic: str) -> bool:
        """Whether `topic` is one this source reads (by name or pattern)."""
        if self.topic_pattern is not None:
            return re.fullmatch(self.topic_pattern, topic) is not None
        return topic in self.topics

    def list_partitions(self, consumer: Any, timeout_s: float) -> list[KafkaTopicPartition]:
        """The partitions this source reads now (metadata from the brokers)."""
        if self.partitions:
            return list(self.partitions)
        metadata = consumer.list_topics(timeout=timeout_s)
        found = []
        for name, topic in metadata.topics.items():
            if name.startswith("__") or not self.matches(name) or topic.error is not None:
                continue
            found += [KafkaTopicPartition(name, p) for p in topic.partitions]
        return sorted(found)

    def create_splits(self) -> list[SourceSplit]:
        kafka = import_kafka()
        consumer = new_client("Consumer", self.consumer_config({}), "KafkaSource")
        try:
            try:
                partitions = self.list_partitions(consumer, CLIENT_TIMEOUT_S)
                missing = [t for t in self.topics if not any(tp.topic == t for tp in partitions)]
                if missing:
                    raise SourceError(
                        f"Kafka topic(s) {', '.join(map(repr, missing))} not found at "
                        f"{self.bootstrap_servers}"
                    )
                starts = self.starting_offsets.resolve(consumer, partitions, CLIENT_TIMEOUT_S)
                stops = (
                    {}
                    if self.stopping_offsets is None
                    else self.stopping_offsets.resolve(
                        consumer, partitions, CLIENT_TIMEOUT_S, stopping=True
                    )
                )
            except kafka.KafkaException as error:
                raise SourceError(
                    f"KafkaSource: cannot read the partitions at {self.bootstrap_servers}: "
                    f"{error.args[0] if error.args else error}"
                ) from None
        finally:
            consumer.close()
        payloads: list[dict[str, Any]] = [{"start": {}, "stop": {}} for _ in range(BUCKETS)]
        for split_id, offset in starts.items():
            payloads[bucket_of(split_id)]["start"][split_id] = offset
        for split_id, offset in stops.items():
            payloads[bucket_of(split_id)]["stop"][split_id] = offset
        return [SourceSplit(f"{BUCKET_PREFIX}{b}", payloads[b]) for b in range(BUCKETS)]

    def create_reader(self, splits: Sequence[SourceSplit]) -> SourceReader:
        from barrierflow.connectors.kafka._reader import KafkaReader

        return KafkaReader(self, splits)


class KafkaSourceBuilder:
    """PyFlink's `KafkaSourceBuilder`: servers, what to read, the deserializer, offsets."""

    def __init__(self) -> None:
        self._servers: str | None = None
        self._topics: list[str] = []
        self._pattern: str | None = None
        self._partitions: set[KafkaTopicPartition] = set()
        self._group_id: str | None = None
        self._start: KafkaOffsetsInitializer | None = None
        self._stop: KafkaOffsetsInitializer | None = None
        self._bounded = False
        self._deserializer: KafkaRecordDeserializationSchema | None = None
        self._properties: dict[str, Any] = {}
        self._dead_letters = False
        self._clock: Clock = SYSTEM_CLOCK

    def set_bootstrap_servers(self, bootstrap_servers: str) -> KafkaSourceBuilder:
        self._servers = bootstrap_servers
        return self

    def set_group_id(self, group_id: str) -> KafkaSourceBuilder:
        """The consumer group: offsets are committed to it when a checkpoint completes (for
        lag monitoring; recovery uses the checkpoint), and `committed_offsets()` reads it."""
        self._group_id = group_id
        return self

    def set_topics(self, *topics: str) -> KafkaSourceBuilder:
        flat = [t for group in topics for t in ([group] if isinstance(group, str) else group)]
        self._topics = flat
        return self

    def set_topic_pattern(self, topic_pattern: str) -> KafkaSourceBuilder:
        """Every topic whose whole name matches the regular expression, also topics created
        while the job runs (found every `partition.discovery.interval.ms`)."""
        try:
            re.compile(topic_pattern)
        except re.error as error:
            raise ConfigurationError(
                f"bad Kafka topic pattern {topic_pattern!r}: {error}"
            ) from None
        self._pattern = topic_pattern
        return self

    def set_partitions(self, partitions: Iterable[KafkaTopicPartition]) -> KafkaSourceBuilder:
        self._partitions = set(partitions)
        return self

    def set_starting_offsets(
        self, starting_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        self._start = _initializer(starting_offsets_initializer, "set_starting_offsets")
        return self

    def set_unbounded(
        self, stopping_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """Stop at these offsets, but stay an unbounded (streaming) source."""
        self._stop = _initializer(stopping_offsets_initializer, "set_unbounded")
        self._bounded = False
        return self

    def set_bounded(
        self, stopping_offsets_initializer: KafkaOffsetsInitializer
    ) -> KafkaSourceBuilder:
        """Stop at these offsets (resolved when the job starts) and end the input."""
        self._stop = _initializer(stopping_offsets_initializer, "set_bounded")
        self._bounded = True
        return self

    def set_value_only_deserializer(self, deserialization_schema: Any) -> KafkaSourceBuilder:
        """The value's bytes to a record: `SimpleStringSchema()`, a
        `JsonRowDeserializationSchema`, anything with `deserialize(bytes)`, or a function. A
        record it makes None is skipped (as in Flink)."""
        self._deserializer = KafkaRecordDeserializationSchema.value_only(deserialization_schema)
        return self

    def set_deserializer(
        self, deserializer: KafkaRecordDeserializationSchema | Callable[..., Any]
    ) -> KafkaSourceBuilder:
        """The whole record (key, headers, timestamp, ...) to a value: a
        `KafkaRecordDeserializationSchema` or a function of a `KafkaRecord`."""
        if not isinstance(deserializer, KafkaRecordDeserializationSchema):
            deserializer = KafkaRecordDeserializationSchema.of(deserializer)
        self._deserializer = deserializer
        return self

    def set_client_id_prefix(self, prefix: str) -> KafkaSourceBuilder:
        self._properties["client.id"] = f"{prefix}-{uuid.uuid4().hex[:8]}"
        return self

    def set_property(self, key: str, value: Any) -> KafkaSourceBuilder:
        """A librdkafka consumer setting (SASL, SSL, `isolation.level`, ...), passed as it is,
        or `partition.discovery.interval.ms`."""
        self._properties[str(key)] = value
        return self

    def set_properties(self, props: Mapping[str, Any]) -> KafkaSourceBuilder:
        for key, value in props.items():
            self.set_property(key, value)
        return self

    def set_dead_letters(self, enabled: bool = True) -> KafkaSourceBuilder:
        """Records the deserializer raises on go to the `DEAD_LETTERS` side output (split
        `<topic>-<partition>`, the offset, the raw value) instead of failing the job."""
        self._dead_letters = bool(enabled)
        return self

    def set_clock(self, clock: Clock) -> KafkaSourceBuilder:
        self._clock = clock
        return self

    def build(self) -> KafkaSource:
        if not self._servers:
            raise ConfigurationError("KafkaSource: set_bootstrap_servers(...) is required")
        chosen = [bool(self._topics), self._pattern is not None, bool(self._partitions)]
        if sum(chosen) != 1:
            raise ConfigurationError(
                "KafkaSource: give exactly one of set_topics, set_topic_pattern, set_partitions"
            )
        if self._deserializer is None:
            raise ConfigurationError(
                "KafkaSource: set_value_only_deserializer(...) or set_deserializer(...) is required"
            )
        if self._start is not None and self._start.kind == "committed" and not self._group_id:
            raise ConfigurationError(
                "KafkaSource: KafkaOffsetsInitializer.committed_offsets() needs set_group_id"
            )
        return KafkaSource(
            self._servers,
            self._deserializer,
            topics=self._topics,
            topic_pattern=self._pattern,
            partitions=self._partitions,
            group_id=self._group_id,
            starting_offsets=self._start,
            stopping_offsets=self._stop,
            bounded=self._bounded,
            properties=self._properties,
            dead_letters=self._dead_letters,
            clock=self._clock,
        )


def _initializer(value: Any, method: str) -> KafkaOffsetsInitializer:
    if not isinstance(value, KafkaOffsetsInitializer):
        raise ConfigurationError(
            f"KafkaSource.{method} takes a KafkaOffsetsInitializer "
            f"(earliest(), latest(), ...), not {value!r}"
        )
    return value
