"""The stream element queues of async I/O (Flink's `StreamElementQueue` family).

Mailbox thread only. A queue holds the elements an async operator has taken in and
not yet emitted: records whose asynchronous call is in flight or done, and watermarks.
It decides what may leave, and in which order; it starts no call and owns no thread.

- `OrderedStreamElementQueue` emits in input order. A watermark is an element of the
  queue like any record, so it leaves after every record before it and before every
  record after it.
- `UnorderedStreamElementQueue` emits a record as soon as it completes, but never
  across a watermark: each watermark splits the queue into segments; the records of
  the first segment leave in completion order, the watermark leaves once all of them
  left, and the records after it only after it.

Both count watermarks against the capacity, as Flink does.

>>> queue = OrderedStreamElementQueue(capacity=3)
>>> first = queue.try_put(Record("a", timestamp=1))
>>> second = queue.try_put(Record("b", timestamp=2))
>>> queue.try_put(Watermark(2)) is not None
True
>>> queue.try_put(Record("c", timestamp=3)) is None          # full: the operator must wait
True
>>> queue.complete(second, ["B"])
>>> queue.has_completed_head()                               # "a" is still in flight
False
>>> queue.complete(first, ["A"])
>>> for _ in range(3):
...     print(queue.poll())
CompletedRecord(results=('A',), timestamp=1)
CompletedRecord(results=('B',), timestamp=2)
Watermark(timestamp=2)
>>> queue.is_empty
True
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from barrierflow.errors import AsyncOperationFailedError
from barrierflow.runtime.elements import Watermark

__all__ = [
    "CompletedRecord",
    "OrderedStreamElementQueue",
    "QueueEntry",
    "Record",
    "StreamElementQueue",
    "UnorderedStreamElementQueue",
]


@dataclass(frozen=True, slots=True)
class Record:
    """An input record of an async operator: its value and event timestamp (None: none)."""

    value: Any
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class CompletedRecord:
    """What a completed record emits: its results, all carrying the input's timestamp."""

    results: tuple[Any, ...]
    timestamp: int | None


QueueElement = Record | Watermark
"""What goes into a queue: a record or a watermark."""

QueueOutput = CompletedRecord | Watermark
"""What comes out of a queue: a completed record's results or a watermark."""


class QueueEntry:
    """The handle of one element in a queue; complete it through the queue that gave it."""

    __slots__ = ("_failed", "_output", "_segment", "element")

    def __init__(self, element: QueueElement, segment: _Segment | None = None) -> None:
        self.element = element
        self._segment = segment
        self._failed = False
        # A watermark is complete the moment it enters the queue.
        self._output: QueueOutput | None = element if isinstance(element, Watermark) else None

    @property
    def is_done(self) -> bool:
        """Whether the element may leave the queue (its call completed, or it is a watermark)."""
        return self._output is not None or self._failed

    def _complete(self, results: Iterable[Any]) -> None:
        self._ensure_incomplete()
        assert isinstance(self.element, Record)
        self._output = CompletedRecord(tuple(results), self.element.timestamp)

    def _fail(self) -> None:
        self._ensure_incomplete()
        self._failed = True

    def _ensure_incomplete(self) -> None:
        if isinstance(self.element, Watermark):
            raise ValueError(f"a watermark entry cannot be completed: {self.element}")
        if self.is_done:
            raise ValueError(f"the entry of {self.element} was completed already")

    def __repr__(self) -> str:
        state = "failed" if self._failed else "done" if self.is_done else "in flight"
        return f"QueueEntry({self.element!r}, {state})"


class StreamElementQueue(Protocol):
    """What an async operator needs of a queue; both queues implement it."""

    @property
    def capacity(self) -> int: ...

    @property
    def size(self) -> int:
        """Entries held: records in flight or completed but not emitted, and watermarks."""

    @property
    def is_empty(self) -> bool: ...

    def try_put(self, element: QueueElement) -> QueueEntry | None:
        """Add an element; None (and nothing added) when the queue is full."""

    def complete(self, entry: QueueEntry, results: Iterable[Any]) -> None:
        """The call of `entry`'s record returned `results`."""

    def complete_exceptionally(self, entry: QueueEntry, error: BaseException) -> None:
        """The call of `entry`'s record failed: raises `AsyncOperationFailedError`."""

    def has_completed_head(self) -> bool:
        """Whether `poll` would return an element."""

    def poll(self) -> QueueOutput | None:
        """Remove and return the next element allowed to leave, or None if none may."""

    def values(self) -> list[QueueElement]:
        """The input of every entry still held, in queue order: what a snapshot stores."""


def _check_capacity(capacity: int) -> int:
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
        raise ValueError(f"the capacity of a stream element queue must be > 0, got {capacity!r}")
    return capacity


def _check_element(element: object) -> None:
    if not isinstance(element, Record | Watermark):
        raise TypeError(f"a stream element queue takes a Record or a Watermark, got {element!r}")


def _fail(entry: QueueEntry, error: BaseException) -> None:
    entry._fail()
    value = entry.element.value if isinstance(entry.element, Record) else entry.element
    raise AsyncOperationFailedError(
        f"could not complete the async operation of the stream element {value!r}: {error!r}"
    ) from error


class OrderedStreamElementQueue:
    """Emits results in input order; watermarks are elements of the queue (Flink's
    `OrderedStreamElementQueue`).

    Mailbox thread only. Guarantees that the output order equals the input order of
    records and watermarks alike; assumes each entry is completed at most once.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = _check_capacity(capacity)
        self._entries: deque[QueueEntry] = deque()

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def size(self) -> int:
        return len(self._entries)

    @property
    def is_empty(self) -> bool:
        return not self._entries

    def try_put(self, element: QueueElement) -> QueueEntry | None:
        _check_element(element)
        if len(self._entries) >= self._capacity:
            return None
        entry = QueueEntry(element)
        self._entries.append(entry)
        return entry

    def complete(self, entry: QueueEntry, results: Iterable[Any]) -> None:
        entry._complete(results)

    def complete_exceptionally(self, entry: QueueEntry, error: BaseException) -> None:
        _fail(entry, error)

    def has_completed_head(self) -> bool:
        return bool(self._entries) and self._entries[0]._output is not None

    def poll(self) -> QueueOutput | None:
        if not self.has_completed_head():
            return None
        return self._entries.popleft()._output

    def values(self) -> list[QueueElement]:
        return [entry.element for entry in self._entries]

    def __repr__(self) -> str:
        return f"OrderedStreamElementQueue(size={self.size}, capacity={self._capacity})"


class _Segment:
    """The entries between two watermarks (or one watermark alone) of an unordered queue."""

    __slots__ = ("completed", "entries")

    def __init__(self) -> None:
        self.entries: dict[QueueEntry, None] = {}
        """Every entry not yet emitted, in input order (an insertion-ordered set)."""
        self.completed: deque[QueueEntry] = deque()
        """The entries that may leave, in completion order."""

    def add(self, entry: QueueEntry) -> None:
        self.entries[entry] = None
        if entry._output is not None:
            self.completed.append(entry)

    def on_completed(self, entry: QueueEntry) -> None:
        if entry in self.entries:
            self.completed.append(entry)

    def poll(self) -> QueueOutput | None:
        if not self.completed:
            return None
        entry = self.completed.popleft()
        del self.entries[entry]
        return entry._output

    @property
    def is_empty(self) -> bool:
        return not self.entries


class UnorderedStreamElementQueue:
    """Emits records in completion order, never across a watermark (Flink's
    `UnorderedStreamElementQueue`).

    Mailbox thread only. Guarantees that every record leaves after every watermark
    that entered before it and before every watermark that entered after it, and that
    watermarks leave in input order; assumes each entry is completed at most once.

    The queue is a list of segments: a segment of records, then a segment holding one
    watermark, then a segment of records, and so on. Records join the last segment;
    only the first segment may emit.
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = _check_capacity(capacity)
        self._segments: deque[_Segment] = deque()
        self._size = 0

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def size(self) -> int:
        return self._size

    @property
    def is_empty(self) -> bool:
        return self._size == 0

    def try_put(self, element: QueueElement) -> QueueEntry | None:
        _check_element(element)
        if self._size >= self._capacity:
            return None
        if isinstance(element, Watermark):
            entry = self._add_watermark(element)
        else:
            entry = self._add_record(element)
        self._size += 1
        return entry

    def _add_record(self, record: Record) -> QueueEntry:
        if not self._segments:
            self._segments.append(_Segment())
        segment = self._segments[-1]
        entry = QueueEntry(record, segment)
        segment.add(entry)
        return entry

    def _add_watermark(self, watermark: Watermark) -> QueueEntry:
        # Reuse the last segment if it is empty (drained, or opened by a watermark just
        # before), otherwise the watermark gets a segment of its own.
        if self._segments and self._segments[-1].is_empty:
            segment = self._segments[-1]
        else:
            segment = _Segment()
            self._segments.append(segment)
        entry = QueueEntry(watermark, segment)
        segment.add(entry)
        # Records after the watermark go to a fresh segment.
        self._segments.append(_Segment())
        return entry

    def complete(self, entry: QueueEntry, results: Iterable[Any]) -> None:
        entry._complete(results)
        if entry._segment is not None:
            entry._segment.on_completed(entry)

    def complete_exceptionally(self, entry: QueueEntry, error: BaseException) -> None:
        _fail(entry, error)

    def has_completed_head(self) -> bool:
        return bool(self._segments) and bool(self._segments[0].completed)

    def poll(self) -> QueueOutput | None:
        if not self._segments:
            return None
        head = self._segments[0]
        output = head.poll()
        if output is not None:
            self._size -= 1
        # Drop a drained head segment when another follows; keep the last one for reuse.
        if len(self._segments) > 1 and head.is_empty:
            self._segments.popleft()
        return output

    def values(self) -> list[QueueElement]:
        return [entry.element for segment in self._segments for entry in segment.entries]

    def __repr__(self) -> str:
        return (
            f"UnorderedStreamElementQueue(size={self._size}, capacity={self._capacity}, "
            f"segments={len(self._segments)})"
        )
