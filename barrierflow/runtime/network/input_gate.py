"""The receiving side of a task: one queue of received elements per input channel.

Mailbox thread only. The task takes elements from channels that are not blocked
by barrier alignment, round-robin; every consumed buffer returns one credit to
its sender, so a blocked channel backs up only its own sender.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.network import codec


class InputGate:
    def __init__(self, channel_count: int) -> None:
        self.channel_count = channel_count
        self._queues: list[deque[Any]] = [deque() for _ in range(channel_count)]
        self._connections: list[Connection | None] = [None] * channel_count
        self._next = 0

    def connected(self, channel: int, conn: Connection) -> None:
        self._connections[channel] = conn

    @property
    def all_connected(self) -> bool:
        return all(conn is not None for conn in self._connections)

    def received(self, channel: int, element: Any) -> None:
        self._queues[channel].append(element)

    def poll(self, is_blocked: Callable[[int], bool]) -> tuple[int, Any] | None:
        """The next element of an unblocked channel, or None."""
        count = self.channel_count
        for step in range(count):
            channel = (self._next + step) % count
            queue = self._queues[channel]
            if queue and not is_blocked(channel):
                self._next = (channel + 1) % count
                element = queue.popleft()
                if type(element) is RecordBatch:
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
