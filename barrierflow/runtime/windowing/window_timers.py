"""The window operator's timers, as one narrow protocol, and its in-memory twin.

`WindowLogic` registers and deletes event-time and processing-time timers per
(key, window); whoever owns the timers calls `WindowLogic.on_event_time` /
`on_processing_time` when one is due. The protocol has exactly the signatures of
`barrierflow.runtime.timers.InternalTimerService`, so that service is a
`WindowTimerAccess` as it is (the window is the timer's namespace).

>>> timers = InMemoryWindowTimers()
>>> timers.register_event_time_timer("alice", "w1", 20)
>>> timers.register_event_time_timer("alice", "w1", 10)
>>> timers.register_event_time_timer("alice", "w1", 10)  # deduplicated
>>> timers.poll_event_time_timer(15)
WindowTimer(key='alice', window='w1', timestamp=10)
>>> timers.poll_event_time_timer(15) is None
True
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import Any, NamedTuple, Protocol

__all__ = ["InMemoryWindowTimers", "WindowTimer", "WindowTimerAccess"]


class WindowTimerAccess(Protocol):
    """Timers per (key, window), deduplicated. Mailbox thread only.

    Registering a timer that exists changes nothing; deleting one that does not
    exist (or that is firing right now) changes nothing.
    """

    def register_event_time_timer(self, key: Hashable, namespace: Hashable, timestamp: int) -> None:
        """Fire `on_event_time(key, namespace, timestamp)` once the watermark reaches timestamp."""

    def register_processing_time_timer(
        self, key: Hashable, namespace: Hashable, timestamp: int
    ) -> None:
        """Fire `on_processing_time(key, namespace, timestamp)` once the clock reaches it."""

    def delete_event_time_timer(self, key: Hashable, namespace: Hashable, timestamp: int) -> None:
        """Forget the event-time timer, if it is registered."""

    def delete_processing_time_timer(
        self, key: Hashable, namespace: Hashable, timestamp: int
    ) -> None:
        """Forget the processing-time timer, if it is registered."""


class WindowTimer(NamedTuple):
    """A due timer: fire it for `key` and `window` at `timestamp`."""

    key: Hashable
    window: Hashable
    timestamp: int


class _TimerList:
    """Timers in registration order; polled earliest first, ties in registration order."""

    def __init__(self) -> None:
        self.timers: list[WindowTimer] = []

    def register(self, timer: WindowTimer) -> None:
        if timer not in self.timers:
            self.timers.append(timer)

    def delete(self, timer: WindowTimer) -> None:
        if timer in self.timers:
            self.timers.remove(timer)

    def poll(self, up_to: int) -> WindowTimer | None:
        due = [timer for timer in self.timers if timer.timestamp <= up_to]
        if not due:
            return None
        first = min(due, key=lambda timer: timer.timestamp)  # min keeps the first of equals
        self.timers.remove(first)
        return first


class InMemoryWindowTimers:
    """A `WindowTimerAccess` in two lists, for tests: timers fire only when polled.

    A driver advances time by polling until None is returned, calling the logic
    for each timer: a timer registered while firing others is polled in the same
    advance if it is due, as in Flink's timer service.
    """

    def __init__(self) -> None:
        self._event_time = _TimerList()
        self._processing_time = _TimerList()

    def register_event_time_timer(self, key: Hashable, namespace: Hashable, timestamp: int) -> None:
        self._event_time.register(WindowTimer(key, namespace, timestamp))

    def register_processing_time_timer(
        self, key: Hashable, namespace: Hashable, timestamp: int
    ) -> None:
        self._processing_time.register(WindowTimer(key, namespace, timestamp))

    def delete_event_time_timer(self, key: Hashable, namespace: Hashable, timestamp: int) -> None:
        self._event_time.delete(WindowTimer(key, namespace, timestamp))

    def delete_processing_time_timer(
        self, key: Hashable, namespace: Hashable, timestamp: int
    ) -> None:
        self._processing_time.delete(WindowTimer(key, namespace, timestamp))

    def poll_event_time_timer(self, watermark: int) -> WindowTimer | None:
        """Remove and return the earliest event-time timer at or before `watermark`."""
        return self._event_time.poll(watermark)

    def poll_processing_time_timer(self, now: int) -> WindowTimer | None:
        """Remove and return the earliest processing-time timer at or before `now`."""
        return self._processing_time.poll(now)

    def event_time_timers(self) -> list[WindowTimer]:
        """The registered event-time timers, in registration order."""
        return list(self._event_time.timers)

    def processing_time_timers(self) -> list[WindowTimer]:
        """The registered processing-time timers, in registration order."""
        return list(self._processing_time.timers)

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of every timer."""
        return {
            "event_time": copy.deepcopy(self._event_time.timers),
            "processing_time": copy.deepcopy(self._processing_time.timers),
        }

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> InMemoryWindowTimers:
        """New timers holding a deep copy of `snapshot`."""
        timers = cls()
        timers._event_time.timers = copy.deepcopy(snapshot["event_time"])
        timers._processing_time.timers = copy.deepcopy(snapshot["processing_time"])
        return timers
