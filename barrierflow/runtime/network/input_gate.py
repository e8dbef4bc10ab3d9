"""The receiving side of a task: one queue of received elements per input channel.

Mailbox thread only. The task takes elements from channels that are not blocked
by barrier alignment, round-robin; every consumed buffer returns one credit to
its sender, so a blocked channel backs up only its own sender.

Every element is queued with the frame it arrived in, so an unaligned checkpoint can
persist what is queued (`queued_frames`) as channel state without encoding it again, and
a restored task puts the recovered channel state at the head of its channels
(`prepend_recovered`), where it is polled first and returns no credit: no sender spent
any on it.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any

from barrierflow.runtime.columnar import is_record_batch
from barrierflow.runtime.network import codec


class InputGate:
    """The input channels of one task, each a queue of (element, frame, returns credit)."""

    def __init__(self, channel_count: int) -> None:
        self.channel_count = channel_count
        self._queues: list[deque[tuple[Any, bytes | None, bool]]] = [
            deque() for _ in range(channel_count)
        ]
        self._connections: list[Connection | None] = [None] * channel_count
        self._next = 0

    def connected(self, channel: int, conn: Connection) -> None:
        self._connections[channel] = conn

    @property
    def all_connected(self) -> bool:
        return all(conn is not None for conn in self._connections)

    def received(self, channel: int, element: Any, frame: bytes | None = None) -> None:
        """Queue `element`, which arrived on `channel` as `frame`."""
        self._queues[channel].append((element, frame, True))

    def prepend_recovered(self, channel: int, pairs: Iterable[tuple[Any, bytes]]) -> None:
        """Put recovered (element, frame) pairs, in their order, ahead of everything queued on
        `channel`; polling them returns no credit."""
        queue = self._queues[channel]
        for element, frame in reversed(list(pairs)):
            queue.appendleft((element, frame, False))

    def queued_frames(self, channel: int) -> list[bytes]:
        """The frames queued on `channel`, oldest first (an element queued without its frame
        is encoded again)."""
        return [_frame_of(element, frame) for element, frame, _ in self._queues[channel]]

    def queued_count(self, channel: int) -> int:
        """How many elements are queued on `channel`."""
        return len(self._queues[channel])

    def poll(self, is_blocked: Callable[[int], bool]) -> tuple[int, Any] | None:
        """The next element of an unblocked channel, or None."""
        count = self.channel_count
        for step in range(count):
            channel = (self._next + step) % count
            queue = self._queues[channel]
            if queue and not is_blocked(channel):
                self._next = (channel + 1) % count
                element, _, returns_credit = queue.popleft()
                if returns_credit and is_record_batch(element):
                    conn = self._connections[channel]
                    assert conn is not None
                    # A sender that is gone is the JobMaster's to handle, not ours.
                    with contextlib.suppress(OSError):
                        conn.send_bytes(codec.encode_credit(1))
                return channel, element
        return None

    def has_available(self, is_blocked: Callable[[int], bool]) -> bool:
        return any(q and not is_blocked(c) for c, q in enumerate(self._queues))

    def close(self) -> None:
        for conn in self._connections:
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.close()


def _frame_of(element: Any, frame: bytes | None) -> bytes:
    if frame is not None:
        return frame
    if is_record_batch(element):
        return codec.encode_records(element)
    return codec.encode_event(element)
