"""KafkaReader: one subtask's partitions, fetched on a thread, handed out on the mailbox thread.

A `_Fetcher` thread owns the librdkafka consumer: it assigns the reader's partitions at their
positions, fetches batches into a bounded queue (waiting while it is full), reports each
partition's end (`enable.partition.eof`), looks for new partitions every discovery interval
and commits offsets to the group when asked. `poll_split_batch` never waits: it drains the
queue into per-partition buffers and returns up to `max_records` records of one partition,
decoded, with their timestamps. Positions are the next offset of each owned partition, as
returned to the task (not as fetched), so a snapshot describes exactly what went downstream.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from barrierflow.connectors.base import BadRecord, SourceReader, SourceSplit, SplitBatch
from barrierflow.connectors.kafka._client import CLIENT_TIMEOUT_S, KafkaRecord, import_kafka
from barrierflow.connectors.kafka._offsets import KafkaTopicPartition
from barrierflow.connectors.kafka._source import BUCKET_PREFIX, KafkaSource, bucket_of
from barrierflow.errors import SourceError

__all__ = ["EARLIEST", "FETCH_BATCH", "FETCH_WAIT_S", "QUEUE_BATCHES", "KafkaReader"]

FETCH_BATCH = 1000
"""Messages the fetcher takes from librdkafka at once (one queue item)."""
FETCH_WAIT_S = 0.1
"""How long one fetch waits for messages (also how soon the fetcher sees a stop)."""
QUEUE_BATCHES = 16
"""Fetched batches a reader holds ahead of its task."""
CLOSE_TIMEOUT_S = 10.0
EARLIEST = -2
"""The position of a partition found while running and not read yet: its earliest offset
(librdkafka's OFFSET_BEGINNING)."""


class KafkaReader(SourceReader):
    """Reads the partitions of its buckets; see the module docstring."""

    def __init__(self, source: KafkaSource, splits: Sequence[SourceSplit]) -> None:
        self.source = source
        self.buckets = {int(split.split_id[len(BUCKET_PREFIX) :]) for split in splits}
        self.starts: dict[str, int] = {}
        self.stops: dict[str, int] = {}
        for split in splits:
            self.starts.update(split.payload["start"])
            self.stops.update(split.payload["stop"])
        self.positions: dict[str, int] = {}
        self._buffers: dict[str, deque[Any]] = {}
        self._ended: set[str] = set()
        """Partitions at their stopping offset whose buffered records may still be going out."""
        self._finished: set[str] = set()
        self._finish_notices: list[str] = []
        self._queue: queue.Queue[tuple[Any, ...]] = queue.Queue(QUEUE_BATCHES)
        self._fetcher: _Fetcher | None = None
        self._next_split = 0

    # ---- the SourceReader contract ------------------------------------------------------

    def restore(self, positions: dict[str, Any]) -> None:
        self.positions = dict(self.starts)
        for split_id, position in positions.items():
            if not isinstance(position, int) or "-" not in split_id:
                continue
            owned = bucket_of(split_id) in self.buckets
            if owned and (split_id in self.starts or self.source.discovery_interval_s):
                self.positions[split_id] = position
        for split_id, position in self.positions.items():
            stop = self.stops.get(split_id)
            if stop is not None and position != EARLIEST and position >= stop:
                self._finish(split_id)

    def snapshot(self) -> dict[str, Any]:
        return dict(self.positions)

    def split_ids(self) -> list[str]:
        return sorted(self.positions)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        polled = self.poll_split_batch(max_records)
        if polled is None:
            return None
        if polled.bad:
            raise SourceError(polled.bad[0].describe("kafka"))
        return list(polled.records)

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        if self._fetcher is None:
            self._start()
        self._drain()
        split_id = self._next_buffered()  # finishes ended partitions whose records are out
        if self._finish_notices:
            return SplitBatch(self._finish_notices.pop(), [], finished=True)
        if split_id is None:
            if self.source.bounded and len(self._finished) == len(self.positions):
                return None
            return SplitBatch(self._idle_split_id(), [])
        return self._decode(split_id, max_records)

    def notify_checkpoint_complete(self, checkpoint_id: int, positions: Any) -> None:
        """Commit the checkpoint's offsets to the consumer group (for lag monitoring only:
        recovery reads the checkpoint)."""
        if self._fetcher is None or not self.source.group_id or not isinstance(positions, dict):
            return
        offsets = {k: v for k, v in positions.items() if isinstance(v, int) and v >= 0}
        if offsets:
            self._fetcher.commits.put(offsets)

    def close(self) -> None:
        fetcher, self._fetcher = self._fetcher, None
        if fetcher is not None:
            fetcher.stop()

    # ---- internals ----------------------------------------------------------------------

    def _start(self) -> None:
        assignments = {s: p for s, p in self.positions.items() if s not in self._finished}
        self._fetcher = _Fetcher(self, assignments)
        self._fetcher.start()

    def _finish(self, split_id: str) -> None:
        if split_id not in self._finished:
            self._finished.add(split_id)
            self._finish_notices.append(split_id)

    def _drain(self) -> None:
        """Move what the fetcher queued into the buffers (never waits)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            kind = item[0]
            if kind == "records":
                for split_id, messages in item[1].items():
                    self._buffers.setdefault(split_id, deque()).extend(messages)
            elif kind == "end":
                self._ended.add(item[1])
            elif kind == "new":
                self.positions.setdefault(item[1], EARLIEST)
            else:  # "failed"
                raise SourceError(f"KafkaSource at {self.source.bootstrap_servers}: {item[1]}")

    def _next_buffered(self) -> str | None:
        """A partition with records ready (taking turns); ended ones finish once empty."""
        for split_id in list(self._ended):
            if not self._buffers.get(split_id):
                self._ended.discard(split_id)
                self._finish(split_id)
        ready = [s for s, buffer in self._buffers.items() if buffer]
        if not ready:
            return None
        self._next_split = (self._next_split + 1) % len(ready)
        return ready[self._next_split]

    def _idle_split_id(self) -> str:
        live = [s for s in self.positions if s not in self._finished]
        return live[0] if live else next(iter(self.positions), "")

    def _decode(self, split_id: str, max_records: int) -> SplitBatch:
        buffer = self._buffers[split_id]
        schema = self.source.deserializer
        function, whole = schema.function, schema.whole_record
        records: list[Any] = []
        timestamps: list[int] = []
        bad: list[BadRecord] = []
        stamped = True
        position = self.positions.get(split_id, EARLIEST)
        while buffer and len(records) < max_records:
            message = buffer.popleft()
            offset = message.offset()
            if offset < position and position != EARLIEST:
                continue  # fetched before a seek: already returned
            kind, timestamp = message.timestamp()
            position = offset + 1
            try:
                value = function(_record(message) if whole else message.value())
            except Exception as error:
                bad.append(BadRecord(split_id, offset, message.value(), _text(error)))
                continue
            if value is None:
                continue  # Flink skips a record its deserializer makes None
            records.append(value)
            stamped = stamped and bool(kind)
            timestamps.append(timestamp)
        self.positions[split_id] = position
        stop = self.stops.get(split_id)
        if stop is not None and position >= stop and not buffer:
            self._ended.add(split_id)
        return SplitBatch(split_id, records, timestamps if stamped else None, bad=bad)


def _record(message: Any) -> KafkaRecord:
    kind, timestamp = message.timestamp()
    return KafkaRecord(
        message.topic(),
        message.partition(),
        message.offset(),
        timestamp if kind else None,
        message.key(),
        message.value(),
        tuple(message.headers() or ()),
    )


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class _Fetcher:
    """The consumer's thread: fetch, report ends, discover partitions, commit offsets."""

    def __init__(self, reader: KafkaReader, assignments: dict[str, int]) -> None:
        self.reader = reader
        self.source = reader.source
        self.assignments = assignments
        self.stops = dict(reader.stops)
        self.known = set(reader.positions)
        self.commits: queue.Queue[dict[str, int]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kafka-fetcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(CLOSE_TIMEOUT_S)

    def _put(self, item: tuple[Any, ...]) -> bool:
        """Queue `item`, waiting while the reader's queue is full; False once stopped."""
        while not self._stop.is_set():
            try:
                self.reader._queue.put(item, timeout=FETCH_WAIT_S)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as error:  # handed to the mailbox thread, which fails the task
            self._put(("failed", _text(error)))

    def _loop(self) -> None:
        kafka = import_kafka()
        consumer = kafka.Consumer(self.source.consumer_config({"enable.partition.eof": True}))
        try:
            first = [_partition(kafka, s, p) for s, p in sorted(self.assignments.items())]
            if first:
                consumer.assign(first)
            interval = self.source.discovery_interval_s
            clock = self.source.clock
            next_discovery = None if interval is None else clock.monotonic() + interval
            while not self._stop.is_set():
                self._fetch(kafka, consumer)
                self._commit(kafka, consumer)
                if next_discovery is not None and clock.monotonic() >= next_discovery:
                    self._discover(kafka, consumer)
                    next_discovery = clock.monotonic() + interval  # type: ignore[operator]
        finally:
            consumer.close()

    def _fetch(self, kafka: Any, consumer: Any) -> None:
        """One fetch, handed on grouped by partition (the mailbox thread only extends)."""
        messages = consumer.consume(FETCH_BATCH, timeout=FETCH_WAIT_S)
        good: dict[str, list[Any]] = {}
        for message in messages:
            error = message.error()
            split_id = f"{message.topic()}-{message.partition()}"
            stop = self.stops.get(split_id)
            if error is None:
                if stop is None or message.offset() < stop:
                    good.setdefault(split_id, []).append(message)
                if stop is not None and message.offset() + 1 >= stop:
                    self._end(consumer, kafka, split_id, good)
                    good = {}
            elif error.code() == kafka.KafkaError._PARTITION_EOF:
                if stop is not None and message.offset() >= stop:
                    self._end(consumer, kafka, split_id, good)
                    good = {}
            elif error.fatal() or error.code() in _FAILING:
                raise kafka.KafkaException(error)
        if good:
            self._put(("records", good))

    def _end(self, consumer: Any, kafka: Any, split_id: str, good: dict[str, list[Any]]) -> None:
        """The partition reached its stopping offset: hand on what came before, report its
        end and stop fetching it."""
        if good:
            self._put(("records", good))
        self.stops.pop(split_id, None)
        self._put(("end", split_id))
        tp = KafkaTopicPartition.of_split_id(split_id)
        consumer.incremental_unassign([kafka.TopicPartition(tp.topic, tp.partition)])

    def _discover(self, kafka: Any, consumer: Any) -> None:
        buckets = self.reader.buckets
        found = self.source.list_partitions(consumer, CLIENT_TIMEOUT_S)
        new = [
            tp
            for tp in found
            if tp.split_id not in self.known and bucket_of(tp.split_id) in buckets
        ]
        if not new:
            return
        for tp in new:
            self.known.add(tp.split_id)
            self._put(("new", tp.split_id))
        consumer.incremental_assign([_partition(kafka, tp.split_id, EARLIEST) for tp in new])

    def _commit(self, kafka: Any, consumer: Any) -> None:
        try:
            offsets = self.commits.get_nowait()
        except queue.Empty:
            return
        partitions = [_partition(kafka, s, o) for s, o in sorted(offsets.items())]
        # monitoring only: a failed commit is repaired by the next completed checkpoint's
        with contextlib.suppress(kafka.KafkaException):
            consumer.commit(offsets=partitions, asynchronous=True)


_FAILING = frozenset({3})
"""UNKNOWN_TOPIC_OR_PART: an assigned partition is gone (its topic deleted)."""


def _partition(kafka: Any, split_id: str, offset: int) -> Any:
    tp = KafkaTopicPartition.of_split_id(split_id)
    return kafka.TopicPartition(tp.topic, tp.partition, offset)
