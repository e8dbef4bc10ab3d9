"""`Pace`: how many records a throttled reader may emit now to stay at or under a rate.

A reader that fell behind (backpressure) catches up by at most `BACKLOG_SECONDS` worth of
records, so the rate stays a ceiling. Mailbox thread only; time comes from the clock given.

>>> now = [0.0]
>>> pace = Pace(100, clock=lambda: now[0])
>>> pace.allowed(50)        # the clock starts at the first call: nothing is due yet
0
>>> now[0] = 0.25
>>> pace.allowed(50)        # 25 are due
25
>>> pace.took(25); pace.allowed(50)
0
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["BACKLOG_SECONDS", "Pace"]

BACKLOG_SECONDS = 1.0
"""A throttled reader that fell behind catches up by at most this many seconds of records."""


class Pace:
    """A records-per-second ceiling for one reader, measured from its first `allowed` call."""

    def __init__(self, records_per_second: float, *, clock: Callable[[], float]) -> None:
        self._rate = records_per_second
        self._clock = clock
        self._started: float | None = None
        self._emitted = 0
        """Records emitted since `_started`, to compare with the schedule."""

    def allowed(self, max_records: int) -> int:
        """How many records may go out now: `max_records`, or fewer to keep to the rate."""
        now = self._clock()
        if self._started is None:
            self._started, self._emitted = now, 0
        # The epsilon keeps float error in clock differences from costing a record.
        due = math.floor((now - self._started) * self._rate + 1e-6) - self._emitted
        backlog = max(1, int(self._rate * BACKLOG_SECONDS))
        if due > backlog:  # fell behind: forget what cannot be caught up
            self._started += (due - backlog) / self._rate
            due = backlog
        return max(0, min(max_records, due))

    def took(self, records: int) -> None:
        """`records` went out."""
        self._emitted += records
