"""Where a Kafka source starts and stops in each partition: PyFlink's offsets initializers.

`KafkaOffsetsInitializer.earliest() | latest() | committed_offsets(...) | timestamp(ms) |
offsets({...})` describe a rule; `resolve` turns it into a concrete offset per partition on
the driver (`KafkaSource.create_splits`), so a restart never resolves "latest" again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from barrierflow.errors import ConfigurationError, SourceError

__all__ = ["KafkaOffsetResetStrategy", "KafkaOffsetsInitializer", "KafkaTopicPartition"]


class KafkaTopicPartition:
    """One partition of one topic (PyFlink's `KafkaTopicPartition(topic, partition)`).

    >>> KafkaTopicPartition("orders", 3).split_id
    'orders-3'
    >>> KafkaTopicPartition.of_split_id("my-topic-12")
    KafkaTopicPartition('my-topic', 12)
    """

    __slots__ = ("_partition", "_topic")

    def __init__(self, topic: str, partition: int) -> None:
        self._topic = topic
        self._partition = int(partition)

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def split_id(self) -> str:
        """`<topic>-<partition>`: the partition's split id, stable across runs."""
        return f"{self._topic}-{self._partition}"

    @classmethod
    def of_split_id(cls, split_id: str) -> KafkaTopicPartition:
        topic, _, partition = split_id.rpartition("-")
        return cls(topic, int(partition))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KafkaTopicPartition):
            return NotImplemented
        return (self._topic, self._partition) == (other._topic, other._partition)

    def __hash__(self) -> int:
        return hash((self._topic, self._partition))

    def __lt__(self, other: KafkaTopicPartition) -> bool:
        return (self._topic, self._partition) < (other._topic, other._partition)

    def __repr__(self) -> str:
        return f"KafkaTopicPartition({self._topic!r}, {self._partition})"

    def __reduce__(self) -> Any:
        return (KafkaTopicPartition, (self._topic, self._partition))


class KafkaOffsetResetStrategy(Enum):
    """Where to start when the rule gives no offset (no committed offset, none given)."""

    LATEST = 0
    EARLIEST = 1
    NONE = 2
    """Fail: the job is refused at start, naming the partition."""


class KafkaOffsetsInitializer:
    """A rule for the offset of each partition; build one with the static methods."""

    def __init__(
        self,
        kind: str,
        *,
        timestamp: int | None = None,
        offsets: Mapping[KafkaTopicPartition, int] | None = None,
        reset: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
    ) -> None:
        self.kind = kind
        self.timestamp_ms = timestamp
        self.offsets_given = dict(offsets or {})
        self.reset = reset

    @staticmethod
    def earliest() -> KafkaOffsetsInitializer:
        """The earliest offset each partition still holds (the default start)."""
        return KafkaOffsetsInitializer("earliest")

    @staticmethod
    def latest() -> KafkaOffsetsInitializer:
        """The end of each partition when the job starts."""
        return KafkaOffsetsInitializer("latest")

    @staticmethod
    def committed_offsets(
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.NONE,
    ) -> KafkaOffsetsInitializer:
        """The consumer group's committed offsets (`set_group_id`); a partition without
        one follows `offset_reset_strategy` (NONE: the job is refused)."""
        return KafkaOffsetsInitializer("committed", reset=offset_reset_strategy)

    @staticmethod
    def timestamp(timestamp: int) -> KafkaOffsetsInitializer:
        """The first record whose timestamp (ms) is at or after `timestamp`."""
        if not isinstance(timestamp, int) or isinstance(timestamp, bool):
            raise ConfigurationError(f"a Kafka start timestamp must be ms as int: {timestamp!r}")
        return KafkaOffsetsInitializer("timestamp", timestamp=timestamp)

    @staticmethod
    def offsets(
        offsets: Mapping[KafkaTopicPartition, int],
        offset_reset_strategy: KafkaOffsetResetStrategy = KafkaOffsetResetStrategy.EARLIEST,
    ) -> KafkaOffsetsInitializer:
        """The offsets given; a partition not listed follows `offset_reset_strategy`."""
        for partition, offset in offsets.items():
            if not isinstance(partition, KafkaTopicPartition) or not isinstance(offset, int):
                raise ConfigurationError(
                    "KafkaOffsetsInitializer.offsets takes {KafkaTopicPartition: int}, "
                    f"not {partition!r}: {offset!r}"
                )
        return KafkaOffsetsInitializer("offsets", offsets=offsets, reset=offset_reset_strategy)

    def __repr__(self) -> str:
        return f"KafkaOffsetsInitializer.{self.kind}"

    def resolve(
        self,
        consumer: Any,
        partitions: Iterable[KafkaTopicPartition],
        timeout_s: float,
        stopping: bool = False,
    ) -> dict[str, int]:
        """The offset of each partition as `{split_id: offset}`, asking the brokers through
        `consumer` (a confluent-kafka Consumer, with the group id for committed offsets).

        Stopping offsets given with `offsets({...})` are taken as they are, also beyond
        what the partition holds now (the source waits for them); a start out of range
        follows the reset strategy."""
        from confluent_kafka import TopicPartition

        partitions = sorted(partitions)
        ends = {tp.split_id: _bounds(consumer, tp, timeout_s) for tp in partitions}
        out: dict[str, int] = {}
        if self.kind in ("earliest", "latest"):
            side = 0 if self.kind == "earliest" else 1
            return {split_id: bounds[side] for split_id, bounds in ends.items()}
        found: dict[str, int] = {}
        if self.kind == "committed" and partitions:
            asked = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
            for answer in consumer.committed(asked, timeout=timeout_s):
                if answer.offset >= 0:
                    found[f"{answer.topic}-{answer.partition}"] = answer.offset
        elif self.kind == "timestamp" and partitions:
            asked = [TopicPartition(tp.topic, tp.partition, self.timestamp_ms) for tp in partitions]
            for answer in consumer.offsets_for_times(asked, timeout=timeout_s):
                key = f"{answer.topic}-{answer.partition}"
                # no record at or after the time: start at the end
                found[key] = answer.offset if answer.offset >= 0 else ends[key][1]
        elif self.kind == "offsets":
            found = {tp.split_id: offset for tp, offset in self.offsets_given.items()}
        for tp in partitions:
            key = tp.split_id
            low, high = ends[key]
            offset = found.get(key)
            as_given = stopping and self.kind == "offsets"
            if offset is not None and (as_given or low <= offset <= high):
                out[key] = offset
            elif self.reset is KafkaOffsetResetStrategy.EARLIEST:
                out[key] = low
            elif self.reset is KafkaOffsetResetStrategy.LATEST:
                out[key] = high
            else:
                what = "no committed offset" if offset is None else f"offset {offset} out of range"
                raise SourceError(
                    f"Kafka partition {key}: {what} and the offset reset strategy is NONE "
                    f"(KafkaOffsetsInitializer.{self.kind}); give a KafkaOffsetResetStrategy"
                )
        return out


def _bounds(consumer: Any, tp: KafkaTopicPartition, timeout_s: float) -> tuple[int, int]:
    from confluent_kafka import TopicPartition

    low, high = consumer.get_watermark_offsets(
        TopicPartition(tp.topic, tp.partition), timeout=timeout_s
    )
    return int(low), int(high)
