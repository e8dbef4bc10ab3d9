"""Time, read in one place: the clock every runtime and driver component is given.

A `Clock` answers two questions: how much time passed (`monotonic`, seconds, never
going back; for timeouts, durations and statistics) and what time it is
(`epoch_millis`, the wall clock; processing time and checkpoint timestamps, as in
Flink). Production passes `SystemClock`; tests pass a `ManualClock` and move it by
hand, so nothing below the integration tests waits for real time.

>>> clock = ManualClock(epoch_ms=1_000)
>>> clock.advance(250)
>>> clock.epoch_millis(), clock.monotonic()
(1250, 0.25)
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Where time is read; any thread may call it."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary start; never goes back."""
        ...

    def epoch_millis(self) -> int:
        """Wall-clock milliseconds since the epoch (processing time)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def epoch_millis(self) -> int:
        return time.time_ns() // 1_000_000


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, epoch_ms: int = 0) -> None:
        self._epoch_ms = epoch_ms
        self._elapsed_ms = 0

    def monotonic(self) -> float:
        return self._elapsed_ms / 1000

    def epoch_millis(self) -> int:
        return self._epoch_ms + self._elapsed_ms

    def advance(self, millis: int) -> None:
        if millis < 0:
            raise ValueError(f"a clock does not go back ({millis} ms)")
        self._elapsed_ms += millis
