"""Routes a task's output records to its output channels, in buffers.

Mailbox thread only. Records wait in a per-channel buffer until it is full or
the buffer timeout passes; events flush the buffers first, so order per channel
is kept.
"""

from __future__ import annotations

from typing import Any

from barrierflow.graph.partitioners import Partitioner
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.channels import OutputChannel

MAX_BACKLOG = 2
"""Queued buffers per channel beyond its credit before the task stops producing."""


class EdgeWriter:
    """The channels of one outgoing job edge and its partitioner."""

    def __init__(self, partitioner: Partitioner, channels: list[OutputChannel], buffer_size: int):
        self.partitioner = partitioner
        self.channels = channels
        self._pending: list[list[Any]] = [[] for _ in channels]
        self._buffer_size = buffer_size

    def emit(self, batch: list[Any]) -> None:
        pending, size = self._pending, self._buffer_size
        for channel, part in self.partitioner.route(batch, len(self.channels)):
            buffer = pending[channel]
            buffer.extend(part)
            if len(buffer) >= size:
                self._flush(channel)

    def flush(self) -> None:
        for channel, buffer in enumerate(self._pending):
            if buffer:
                self._flush(channel)

    def _flush(self, channel: int) -> None:
        self.channels[channel].send_buffer(codec.encode_batch(self._pending[channel]))
        self._pending[channel] = []

    def broadcast_event(self, frame: bytes) -> None:
        self.flush()
        for channel in self.channels:
            channel.send_event(frame)


class RecordWriter:
    """All outgoing edges of a task."""

    def __init__(self, edges: list[EdgeWriter]) -> None:
        self.edges = edges
        self.channels = [c for e in edges for c in e.channels]

    def emit(self, batch: list[Any]) -> None:
        for edge in self.edges:
            edge.emit(batch)

    def flush(self) -> None:
        for edge in self.edges:
            edge.flush()

    def broadcast_event(self, event: codec.Event) -> None:
        frame = codec.encode_event(event)
        for edge in self.edges:
            edge.broadcast_event(frame)

    def is_backpressured(self) -> bool:
        return any(channel.backlog > MAX_BACKLOG for channel in self.channels)

    def close(self) -> None:
        for channel in self.channels:
            channel.close()
