"""Routes a task's output records to its output channels, in buffers.

Mailbox thread only. Records wait in a per-channel buffer until it is full or
the buffer timeout passes; events flush the buffers first, so order per channel
is kept. A latency marker goes to one random channel of each edge (as Flink's
`randomEmit`), after that channel's buffered records. A buffer keeps timestamps only
while some record in it has one: records without a timestamp that join such a buffer
get `NO_TIMESTAMP`.

A `ColumnarBatch` whose converter can travel (`codec.travels_as_arrow`) is routed with
`Partitioner.route_columnar` and buffered per channel as Arrow parts, sent as one Arrow
frame (the parts concatenated) once they hold a buffer's worth of rows; a channel's
buffer holds one kind at a time, so a part of the other kind, schema, converter or
timestamp presence first flushes what is buffered (order per channel is kept).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa

from barrierflow.runtime.batch import NO_TIMESTAMP
from barrierflow.runtime.columnar import AnyBatch, ColumnarBatch
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.channels import OutputChannel
from barrierflow.runtime.partitioners import Partitioner

MAX_BACKLOG = 2
"""Queued buffers per channel beyond its credit before the task stops producing."""


class EdgeWriter:
    """The channels of one outgoing job edge and its partitioner."""

    def __init__(
        self,
        partitioner: Partitioner,
        channels: list[OutputChannel],
        buffer_size: int,
        source_operator: int = -1,
        side_output: str | None = None,
    ):
        self.partitioner = partitioner
        self.channels = channels
        self.source_operator = source_operator
        """Index in the chain of the operator whose output feeds this edge (-1: the last)."""
        self.side_output = side_output
        """The OutputTag id this edge carries, or None for the operator's main output."""
        self._pending: list[list[Any]] = [[] for _ in channels]
        self._stamps: list[list[int] | None] = [None for _ in channels]
        self._columnar: list[list[ColumnarBatch]] = [[] for _ in channels]
        self._columnar_rows = [0 for _ in channels]
        self._buffer_size = buffer_size
        self.random = random.Random()
        """Picks the channel of each latency marker (a test may seed it)."""

    def emit(self, batch: AnyBatch) -> None:
        if type(batch) is ColumnarBatch and codec.travels_as_arrow(batch.converter):
            self._emit_columnar(batch)
            return
        pending, size, columnar = self._pending, self._buffer_size, self._columnar
        if batch.timestamps is None:
            stamps = self._stamps
            for channel, part in self.partitioner.route(batch.values, len(self.channels)):
                if columnar[channel]:
                    self._flush_columnar(channel)
                buffer = pending[channel]
                if stamps[channel] is not None:
                    stamps[channel].extend([NO_TIMESTAMP] * len(part))  # type: ignore[union-attr]
                buffer.extend(part)
                if len(buffer) >= size:
                    self._flush(channel)
            return
        for channel, part, timestamps in self.partitioner.route_with_timestamps(
            batch.values, batch.timestamps, len(self.channels)
        ):
            if columnar[channel]:
                self._flush_columnar(channel)
            buffer = pending[channel]
            channel_stamps = self._stamps[channel]
            if channel_stamps is None:
                channel_stamps = self._stamps[channel] = [NO_TIMESTAMP] * len(buffer)
            channel_stamps.extend(timestamps)
            buffer.extend(part)
            if len(buffer) >= size:
                self._flush(channel)

    def _emit_columnar(self, batch: ColumnarBatch) -> None:
        pending, columnar, rows, size = (
            self._pending,
            self._columnar,
            self._columnar_rows,
            self._buffer_size,
        )
        for channel, part in self.partitioner.route_columnar(batch, len(self.channels)):
            if pending[channel]:
                self._flush(channel)
            parts = columnar[channel]
            if parts and not _joinable(parts[0], part):
                self._flush_columnar(channel)
            parts.append(part)
            rows[channel] += len(part)
            if rows[channel] >= size:
                self._flush_columnar(channel)

    def flush(self) -> None:
        for channel, buffer in enumerate(self._pending):
            if buffer:
                self._flush(channel)
        for channel, parts in enumerate(self._columnar):
            if parts:
                self._flush_columnar(channel)

    def _flush_columnar(self, channel: int) -> None:
        parts = self._columnar[channel]
        first = parts[0]
        if len(parts) == 1:
            data, stamps = first.data, first.timestamp_array
        else:
            data = pa.concat_batches([part.data for part in parts])
            stamps = None
            if first.timestamp_array is not None:
                stamps = np.concatenate([part.timestamp_array for part in parts])  # type: ignore[misc]
        self.channels[channel].send_buffer(codec.encode_arrow(data, stamps, first.converter))
        self._columnar[channel] = []
        self._columnar_rows[channel] = 0

    def _flush(self, channel: int) -> None:
        self.channels[channel].send_buffer(
            codec.encode_batch(self._pending[channel], self._stamps[channel])
        )
        self._pending[channel] = []
        self._stamps[channel] = None

    def broadcast_event(self, frame: bytes) -> None:
        self.flush()
        for channel in self.channels:
            channel.send_event(frame)

    def emit_latency_marker(self, frame: bytes) -> None:
        """Send a latency marker's frame on one random channel, after its buffered records."""
        channels = self.channels
        if not channels:
            return
        channel = self.random.randrange(len(channels))
        if self._pending[channel]:
            self._flush(channel)
        if self._columnar[channel]:
            self._flush_columnar(channel)
        channels[channel].send_event(frame)

    def broadcast_priority_event(self, frame: bytes) -> list[list[bytes]]:
        """Flush, then send `frame` on every channel ahead of its queue (an unaligned barrier);
        per channel, the queued stream frames it overtook (`OutputChannel.send_priority_event`)."""
        self.flush()
        return [channel.send_priority_event(frame) for channel in self.channels]


def _joinable(buffered: ColumnarBatch, part: ColumnarBatch) -> bool:
    """Whether `part` may share an Arrow frame with what a channel buffered."""
    return (
        part.converter is buffered.converter
        and (part.timestamp_array is None) == (buffered.timestamp_array is None)
        and (part.data.schema is buffered.data.schema or part.data.schema == buffered.data.schema)
    )


class RecordWriter:
    """All outgoing edges of a task: events that concern the whole task go to every edge."""

    def __init__(self, edges: list[EdgeWriter]) -> None:
        self.edges = edges
        self.channels = [c for e in edges for c in e.channels]

    def edges_of(self, source_operator: int, side_output: str | None) -> list[EdgeWriter]:
        """The edges fed by one output (main or side) of the chain's operator at that index."""
        return [
            edge
            for edge in self.edges
            if edge.source_operator == source_operator and edge.side_output == side_output
        ]

    def side_outputs_of(self, source_operator: int) -> set[str]:
        """The OutputTag ids of the operator at that index that leave over an edge."""
        return {
            edge.side_output
            for edge in self.edges
            if edge.source_operator == source_operator and edge.side_output is not None
        }

    def flush(self) -> None:
        for edge in self.edges:
            edge.flush()

    def broadcast_event(self, event: codec.Event) -> None:
        frame = codec.encode_event(event)
        for edge in self.edges:
            edge.broadcast_event(frame)

    def broadcast_priority_event(self, event: codec.Event) -> dict[int, list[bytes]]:
        """Send `event` ahead of everything queued on every channel; the overtaken stream frames
        by channel index (over all edges, as in `channels`), only channels that had some."""
        frame = codec.encode_event(event)
        overtaken: dict[int, list[bytes]] = {}
        index = 0
        for edge in self.edges:
            for frames in edge.broadcast_priority_event(frame):
                if frames:
                    overtaken[index] = frames
                index += 1
        return overtaken

    def send_recovered(self, outputs: dict[int, list[bytes]]) -> None:
        """Re-send recovered output channel state, by channel index, before any new output."""
        for index, frames in sorted(outputs.items()):
            self.channels[index].send_recovered(frames)

    def is_backpressured(self) -> bool:
        """Some channel queued more than MAX_BACKLOG buffers beyond its credit: the task stops
        producing and waits for credit (its metrics count that wait as backpressured)."""
        return any(channel.backlog > MAX_BACKLOG for channel in self.channels)

    def bytes_sent(self) -> int:
        """Every byte handed to the output channels so far (records and events)."""
        return sum(channel.bytes_sent for channel in self.channels)

    def close(self) -> None:
        for channel in self.channels:
            channel.close()
