"""AsyncWaitLogic: what Flink's `AsyncWaitOperator` does, without the operator around it.

Mailbox thread only. The logic puts each input element into its stream element queue,
starts the record's async call through `invoke`, and emits what the queue lets out
through `output` whenever something completes. The operator adapter supplies three
things:

- `invoke(value, on_complete, on_error)`: starts a call (an `AsyncFunctionRunner`'s
  `invoke`), whose outcome must come back on the mailbox thread;
- `output`: `emit_results(results, timestamp)` and `emit_watermark(watermark)`;
- `yield_to_mailbox()`: runs at least one pending mail, waiting for one if there is
  none. The logic calls it while the queue is full (backpressure: no input is taken
  until a call completes) and while it drains at the end of input.

Checkpoints: `snapshot_state()` is the input of every element still in the queue, in
queue order (records in flight or completed but not yet emitted, and watermarks).
`restore_state` takes it back and processes those elements again, in that order, as
if they were new input: their calls run again, and since none of their results was
emitted before the checkpoint, the output stays exactly-once.

>>> class Output:
...     def emit_results(self, results, timestamp):
...         print("results", results, "at", timestamp)
...     def emit_watermark(self, watermark):
...         print(watermark)
>>> calls = []
>>> def invoke(value, on_complete, on_error):
...     calls.append((value, on_complete))
>>> logic = AsyncWaitLogic.ordered(2, invoke, Output())
>>> logic.process_element("a", 1, yield_to_mailbox=None)
>>> logic.process_element("b", 2, yield_to_mailbox=None)
>>> logic.snapshot_state()
[Record(value='a', timestamp=1), Record(value='b', timestamp=2)]
>>> calls[1][1](["B"])                        # "b" completes first: held back
>>> calls[0][1](["A"])
results ('A',) at 1
results ('B',) at 2
"""

from __future__ import annotations

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
from barrierflow.runtime.elements import Watermark

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
    """Feeds a stream element queue, starts the calls, emits what may leave.

    Mailbox thread only. Guarantees the queue's order (see `OrderedStreamElementQueue`
    and `UnorderedStreamElementQueue`) and that at most `capacity` elements are held;
    assumes every call's outcome is delivered once, on the mailbox thread.
    """

    def __init__(self, queue: StreamElementQueue, invoke: Invoke, output: AsyncWaitOutput) -> None:
        self._queue = queue
        self._invoke = invoke
        self._output = output

    @staticmethod
    def ordered(capacity: int, invoke: Invoke, output: AsyncWaitOutput) -> AsyncWaitLogic:
        return AsyncWaitLogic(OrderedStreamElementQueue(capacity), invoke, output)

    @staticmethod
    def unordered(capacity: int, invoke: Invoke, output: AsyncWaitOutput) -> AsyncWaitLogic:
        return AsyncWaitLogic(UnorderedStreamElementQueue(capacity), invoke, output)

    @property
    def queue(self) -> StreamElementQueue:
        return self._queue

    # ---- input ---------------------------------------------------------------------------------

    def process_element(
        self, value: Any, timestamp: int | None, yield_to_mailbox: Callable[[], None] | None
    ) -> None:
        """Take one record in, waiting (running mails) while the queue is full."""
        entry = self._put(Record(value, timestamp), yield_to_mailbox)
        self._invoke(
            value,
            lambda results: self._on_complete(entry, results),
            lambda error: self._on_error(entry, error),
        )

    def process_watermark(
        self, watermark: Watermark, yield_to_mailbox: Callable[[], None] | None
    ) -> None:
        """Take one watermark in (it holds a place in the queue) and emit what may leave."""
        self._put(watermark, yield_to_mailbox)
        self._emit_completed()

    def finish(self, yield_to_mailbox: Callable[[], None]) -> None:
        """End of input: run mails until every element has left the queue."""
        while not self._queue.is_empty:
            yield_to_mailbox()

    def _put(
        self, element: QueueElement, yield_to_mailbox: Callable[[], None] | None
    ) -> QueueEntry:
        while True:
            entry = self._queue.try_put(element)
            if entry is not None:
                return entry
            if yield_to_mailbox is None:
                raise RuntimeError(
                    f"the async queue is full ({self._queue.capacity} elements) and there "
                    "is no mailbox to wait on"
                )
            yield_to_mailbox()

    # ---- completions (mails) -------------------------------------------------------------------

    def _on_complete(self, entry: QueueEntry, results: list[Any]) -> None:
        self._queue.complete(entry, results)
        self._emit_completed()

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
        """The input of every element in the queue, in queue order (a copy)."""
        return self._queue.values()

    def restore_state(
        self, elements: Sequence[QueueElement], yield_to_mailbox: Callable[[], None] | None
    ) -> None:
        """Process the elements of a snapshot again, in order: call the records again and
        put the watermarks back in their places."""
        for element in elements:
            if isinstance(element, Record):
                self.process_element(element.value, element.timestamp, yield_to_mailbox)
            elif isinstance(element, Watermark):
                self.process_watermark(element, yield_to_mailbox)
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
