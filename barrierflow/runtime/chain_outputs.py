"""The outputs that connect the operators of a chain to each other and to the task's edges.

Mailbox thread only. Each operator of a chain gets one `OperatorOutput`: its main
output goes to the next operator (`ChainingOutput`) or, for the last operator, to
the edges that leave the task (`RecordWriterOutput`); each of its side outputs that
something consumes goes to the edges of that side output. A watermark or status
goes to every one of them, after the records emitted before it. A latency marker
(`emit_latency_marker`) also goes to each of them, but never into an operator's code:
`ChainingOutput` hands it straight to the next operator's output, and each edge sends
it on one random channel. `CollectingOutput` is the in-memory twin tests put at the
end of a chain.
"""

from __future__ import annotations

from typing import Any

from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import LatencyMarker, StreamStatus, Watermark
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.record_writer import EdgeWriter
from barrierflow.runtime.operators.base import Output, StreamOperator

__all__ = ["ChainingOutput", "CollectingOutput", "OperatorOutput", "RecordWriterOutput"]


class ChainingOutput:
    """Hands a chained operator's main output to the next operator of the chain."""

    def __init__(self, operator: StreamOperator) -> None:
        self.operator = operator
        self.collect = operator.process_batch
        self.emit_watermark = operator.process_watermark
        self.emit_stream_status = operator.process_stream_status

    def collect_side(self, tag_id: str, batch: RecordBatch) -> None:
        raise AssertionError("side outputs are routed by OperatorOutput")

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        """Past the next operator's code, to its own output (which records the marker's age
        for the operator after it, if any, and passes it on)."""
        self.operator.output.emit_latency_marker(marker)


class RecordWriterOutput:
    """Sends one output (main or side) of one operator over its edges.

    Guarantees that while this output's status is IDLE no watermark leaves it (Flink's
    RecordWriterOutput), and that a status goes out only when it changes. The output
    starts ACTIVE, as every downstream channel assumes. `records` counts the records that
    left the task through it (once each, however many edges take them).
    """

    def __init__(self, edges: list[EdgeWriter]) -> None:
        self.edges = edges
        self.status = StreamStatus.ACTIVE
        self.records = 0

    def collect(self, batch: RecordBatch) -> None:
        if self.edges:
            self.records += len(batch)
        for edge in self.edges:
            edge.emit(batch)

    def collect_side(self, tag_id: str, batch: RecordBatch) -> None:
        raise AssertionError("side outputs are routed by OperatorOutput")

    def emit_watermark(self, watermark: Watermark) -> None:
        if self.status is StreamStatus.IDLE or not self.edges:
            return
        frame = codec.encode_event(watermark)
        for edge in self.edges:
            edge.broadcast_event(frame)

    def emit_stream_status(self, status: StreamStatus) -> None:
        if status is self.status:
            return
        self.status = status
        frame = codec.encode_event(status)
        for edge in self.edges:
            edge.broadcast_event(frame)

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        """One random channel of each edge, idle or not (a marker is no event time)."""
        if not self.edges:
            return
        frame = codec.encode_event(marker)
        for edge in self.edges:
            edge.emit_latency_marker(frame)


class OperatorOutput:
    """The output of one operator: its main output, and its consumed side outputs by tag id."""

    def __init__(self, main: Output, sides: dict[str, Output] | None = None) -> None:
        self.main = main
        self.sides = sides or {}
        self.collect = main.collect
        if not self.sides:
            self.emit_watermark = main.emit_watermark
            self.emit_stream_status = main.emit_stream_status
            self.emit_latency_marker = main.emit_latency_marker

    def collect_side(self, tag_id: str, batch: RecordBatch) -> None:
        side = self.sides.get(tag_id)
        if side is not None:
            side.collect(batch)

    def emit_watermark(self, watermark: Watermark) -> None:  # type: ignore[no-redef]
        for side in self.sides.values():
            side.emit_watermark(watermark)
        self.main.emit_watermark(watermark)

    def emit_stream_status(self, status: StreamStatus) -> None:  # type: ignore[no-redef]
        for side in self.sides.values():
            side.emit_stream_status(status)
        self.main.emit_stream_status(status)

    def emit_latency_marker(self, marker: LatencyMarker) -> None:  # type: ignore[no-redef]
        for side in self.sides.values():
            side.emit_latency_marker(marker)
        self.main.emit_latency_marker(marker)


class CollectingOutput:
    """Remembers everything emitted, in order, as plain tuples (for tests and tools).

    ("record", value, timestamp or None), ("side", tag id, value, timestamp or None),
    ("watermark", timestamp), ("status", StreamStatus), ("latency", LatencyMarker).

    >>> out = CollectingOutput()
    >>> out.collect(RecordBatch(["a"], [5]))
    >>> out.emit_watermark(Watermark(5))
    >>> out.take()
    [('record', 'a', 5), ('watermark', 5)]
    >>> out.take()
    []
    """

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def collect(self, batch: RecordBatch) -> None:
        self.events.extend(("record", value, ts) for value, ts in batch.records())

    def collect_side(self, tag_id: str, batch: RecordBatch) -> None:
        self.events.extend(("side", tag_id, value, ts) for value, ts in batch.records())

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(("watermark", watermark.timestamp))

    def emit_stream_status(self, status: StreamStatus) -> None:
        self.events.append(("status", status))

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        self.events.append(("latency", marker))

    def take(self) -> list[tuple[Any, ...]]:
        """Everything emitted since the last call."""
        events, self.events = self.events, []
        return events

    def records(self) -> list[Any]:
        """The values of the main output emitted so far (without taking them)."""
        return [event[1] for event in self.events if event[0] == "record"]
