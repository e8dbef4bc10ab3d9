"""AsyncWaitLogic: what Flink's `AsyncWaitOperator` does, without the operator around it.

Mailbox thread only, and it never waits. The logic puts each input element into its
stream element queue, starts the record's async call through `invoke`, and emits what
the queue lets out through `output` whenever something completes. The operator adapter
supplies two things:

- `invoke(value, on_complete, on_error)`: starts a call (an `AsyncFunctionRunner`'s
  `invoke`), whose outcome must come back later as a mail on the mailbox thread;
- `output`: `emit_results(results, timestamp)` and `emit_watermark(watermark)`.

Backpressure without waiting: input that finds the queue full is held, in order, in the
overflow (at most what one unit of the task's work delivers: the rest of a batch, and a
watermark), and `accepts_input()` turns False. Each completion emits what may leave and
moves held elements into the queue as room appears; once the overflow is empty the logic
accepts input again. After the maximum watermark (end of input) it also refuses input
until every element has left, so the task does not finish while calls are in flight.

Checkpoints: `snapshot_state()` is the input of every element held, in order: the queue
(records in flight or completed but not yet emitted, and watermarks), then the overflow.
`restore_state` takes it back as held input and starts the calls again as the queue
has room: none of their results was emitted before the checkpoint, so the output stays
exactly-once.

>>> class Output:
...     def emit_results(self, results, timestamp):
...         print("results", results, "at", timestamp)
...     def emit_watermark(self, watermark):
...         print(watermark)
>>> calls = []
>>> def invoke(value, on_complete, on_error):
...     calls.append((value, on_complete))
>>> logic = AsyncWaitLogic.ordered(1, invoke, Output())
>>> logic.process_element("a", 1)
>>> logic.process_element("b", 2)             # the queue is full: "b" is held
>>> logic.accepts_input(), [value for value, _ in calls]
(False, ['a'])
>>> logic.snapshot_state()
[Record(value='a', timestamp=1), Record(value='b', timestamp=2)]
>>> calls[0][1](["A"])                        # "a" completes (a mail): "b" goes in
results ('A',) at 1
>>> logic.accepts_input(), [value for value, _ in calls]
(True, ['a', 'b'])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from barrierflow.errors import StateRestoreError
from barrierflow.runtime.async_io.queue import (
    CompletedRecord,
    OrderedStreamElementQueue,
    QueueElement,
    QueueEntry,
    Record,
    StreamElementQueue,
    UnorderedStreamElementQueue,
)
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark

__all__ = [
    "AsyncWaitLogic",
    "AsyncWaitOutput",
    "Invoke",
    "decode_elements",
    "encode_elements",
]

Invoke = Callable[[Any, Callable[[list[Any]], None], Callable[[BaseException], None]], None]
"""Starts the async call of a value: `invoke(value, on_complete, on_error)`."""


class AsyncWaitOutput(Protocol):
    """Where the logic sends what leaves the queue, in the order it leaves."""

    def emit_results(self, results: tuple[Any, ...], timestamp: int | None) -> None:
        """The results of one record, each to be emitted with the record's timestamp."""

    def emit_watermark(self, watermark: Watermark) -> None: ...


class AsyncWaitLogic:
    """Feeds a stream element queue, starts the calls, emits what may leave; never waits.

    Mailbox thread only. Guarantees the queue's order (see `OrderedStreamElementQueue`
    and `UnorderedStreamElementQueue`) over all input, held or not, that at most
    `capacity` calls are in flight, and that nothing taken in is dropped; assumes every
    call's outcome is delivered once, as a mail on the mailbox thread, and that the
    caller gives no input while `accepts_input()` is False.
    """

    def __init__(self, queue: StreamElementQueue, invoke: Invoke, output: AsyncWaitOutput) -> None:
        self._queue = queue
        self._invoke = invoke
        self._output = output
        self._overflow: deque[QueueElement] = deque()
        """Input taken in while the queue was full, in input order; not yet called."""
        self._input_ended = False
        """The maximum watermark was taken in: no more input will come."""

    @staticmethod
    def ordered(capacity: int, invoke: Invoke, output: AsyncWaitOutput) -> AsyncWaitLogic:
        return AsyncWaitLogic(OrderedStreamElementQueue(capacity), invoke, output)

    @staticmethod
    def unordered(capacity: int, invoke: Invoke, output: AsyncWaitOutput) -> AsyncWaitLogic:
        return AsyncWaitLogic(UnorderedStreamElementQueue(capacity), invoke, output)

    @property
    def queue(self) -> StreamElementQueue:
        return self._queue

    @property
    def held(self) -> int:
        """Elements in the overflow: taken in, waiting for room in the queue."""
        return len(self._overflow)

    @property
    def is_drained(self) -> bool:
        """Whether nothing is held: no call in flight, no result or input waiting."""
        return not self._overflow and self._queue.is_empty

    def accepts_input(self) -> bool:
        """False while input is held for lack of room, and after the end of input until
        every element has left: the task then only runs mails."""
        if self._overflow:
            return False
        return not self._input_ended or self._queue.is_empty

    # ---- input ---------------------------------------------------------------------------------

    def process_element(self, value: Any, timestamp: int | None) -> None:
        """Take one record in: call it now if the queue has room, else hold it."""
        self._take(Record(value, timestamp))

    def process_watermark(self, watermark: Watermark) -> None:
        """Take one watermark in (it holds a place in the queue) and emit what may leave.

        The maximum watermark ends the input; a second one (replayed after a restore of a
        snapshot that held the first) is dropped.
        """
        if watermark.timestamp >= MAX_WATERMARK:
            if self._input_ended:
                return
            self._input_ended = True
        self._take(watermark)

    def _take(self, element: QueueElement) -> None:
        overflow = self._overflow
        if overflow and isinstance(element, Watermark) and isinstance(overflow[-1], Watermark):
            # Two held watermarks in a row: the later one says all the earlier one does
            # (periodic watermarks keep coming while the input waits; this bounds them).
            overflow[-1] = element
        else:
            overflow.append(element)
        self._progress()

    def _progress(self) -> None:
        """Move held input into the queue and emit what may leave, until neither can go on."""
        while True:
            self._admit()
            if not self._queue.has_completed_head():
                return
            self._emit_completed()

    def _admit(self) -> None:
        overflow, queue = self._overflow, self._queue
        while overflow:
            entry = queue.try_put(overflow[0])
            if entry is None:
                return
            element = overflow.popleft()
            if isinstance(element, Record):
                self._start_call(entry, element.value)

    def _start_call(self, entry: QueueEntry, value: Any) -> None:
        self._invoke(
            value,
            lambda results: self._on_complete(entry, results),
            lambda error: self._on_error(entry, error),
        )

    # ---- completions (mails) -------------------------------------------------------------------

    def _on_complete(self, entry: QueueEntry, results: list[Any]) -> None:
        self._queue.complete(entry, results)
        self._progress()

    def _on_error(self, entry: QueueEntry, error: BaseException) -> None:
        self._queue.complete_exceptionally(entry, error)  # raises: the task fails

    def _emit_completed(self) -> None:
        while self._queue.has_completed_head():
            element = self._queue.poll()
            if isinstance(element, CompletedRecord):
                self._output.emit_results(element.results, element.timestamp)
            elif isinstance(element, Watermark):
                self._output.emit_watermark(element)

    # ---- checkpoints ---------------------------------------------------------------------------

    def snapshot_state(self) -> list[QueueElement]:
        """The input of every element held, in order: the queue's, then the overflow (a copy)."""
        return [*self._queue.values(), *self._overflow]

    def restore_state(self, elements: Sequence[QueueElement]) -> None:
        """Take the elements of a snapshot back as input, in order: the records are called
        again as the queue has room, the watermarks go back in their places."""
        for element in elements:
            if isinstance(element, Record):
                self.process_element(element.value, element.timestamp)
            elif isinstance(element, Watermark):
                self.process_watermark(element)
            else:
                raise StateRestoreError(f"unknown element in an async I/O snapshot: {element!r}")


def encode_elements(elements: Sequence[QueueElement]) -> list[list[Any]]:
    """Snapshot elements as plain lists: ["r", value, timestamp] or ["w", timestamp].

    Values are left as they are; the snapshot format decides how to serialize them.
    """
    encoded: list[list[Any]] = []
    for element in elements:
        if isinstance(element, Record):
            encoded.append(["r", element.value, element.timestamp])
        elif isinstance(element, Watermark):
            encoded.append(["w", element.timestamp])
        else:
            raise TypeError(f"not a queue element: {element!r}")
    return encoded


def decode_elements(encoded: Sequence[Sequence[Any]]) -> list[QueueElement]:
    """The inverse of `encode_elements`."""
    elements: list[QueueElement] = []
    for item in encoded:
        if len(item) == 3 and item[0] == "r":
            elements.append(Record(item[1], item[2]))
        elif len(item) == 2 and item[0] == "w":
            elements.append(Watermark(item[1]))
        else:
            raise StateRestoreError(f"unknown element in an async I/O snapshot: {item!r}")
    return elements
