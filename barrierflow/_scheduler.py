"""Delayed actions for a mailbox loop: what is due when, without a timer thread.

A mailbox loop (a StreamTask's, the JobMaster's) owns one `Scheduler`. Code on
that loop schedules an action with a delay; the loop asks `wait_s()` how long it
may block on its mailbox, and runs `run_due()` after every wake-up. Nothing
sleeps, nothing runs on another thread, and with a `ManualClock` a test fires
actions by advancing the clock (Flink's `ManuallyTriggeredScheduledExecutor`).

Mailbox thread only.

>>> from barrierflow._clock import ManualClock
>>> clock = ManualClock()
>>> scheduler = Scheduler(clock)
>>> fired = []
>>> handle = scheduler.schedule(100, lambda: fired.append("a"), "a")
>>> _ = scheduler.schedule(50, lambda: fired.append("b"), "b")
>>> scheduler.wait_s(1.0)
0.05
>>> clock.advance(100)
>>> scheduler.run_due()
2
>>> fired
['b', 'a']
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from barrierflow._clock import Clock


@dataclass(order=True)
class ScheduledAction:
    """One pending action; `cancel()` makes it never run."""

    due_s: float
    sequence: int
    action: Callable[[], None] = field(compare=False)
    description: str = field(compare=False, default="")
    cancelled: bool = field(compare=False, default=False)

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    """Actions due at a clock time, run in due order (ties: in scheduling order)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._heap: list[ScheduledAction] = []
        self._sequence = itertools.count()

    def schedule(
        self, delay_ms: float, action: Callable[[], None], description: str = ""
    ) -> ScheduledAction:
        """Run `action` on the loop once `delay_ms` passed (0: at the next `run_due`)."""
        entry = ScheduledAction(
            self._clock.monotonic() + max(delay_ms, 0) / 1000,
            next(self._sequence),
            action,
            description,
        )
        heapq.heappush(self._heap, entry)
        return entry

    def wait_s(self, longest: float) -> float:
        """How long the loop may block: until the next action is due, at most `longest`."""
        self._drop_cancelled()
        if not self._heap:
            return longest
        return max(0.0, min(longest, self._heap[0].due_s - self._clock.monotonic()))

    def run_due(self) -> int:
        """Run every action that is due now; returns how many ran."""
        ran = 0
        now = self._clock.monotonic()
        while self._heap and self._heap[0].due_s <= now:
            entry = heapq.heappop(self._heap)
            if not entry.cancelled:
                entry.action()
                ran += 1
        return ran

    def pending(self) -> list[str]:
        """Descriptions of the actions not yet run, in due order (debugging, tests)."""
        return [e.description for e in sorted(self._heap) if not e.cancelled]

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
