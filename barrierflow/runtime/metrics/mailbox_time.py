"""MailboxTime: how a task's mailbox loop spends its time, as busy, idle or backpressured.

Flink's `busyTimeMsPerSecond`, `idleTimeMsPerSecond` and `backPressuredTimeMsPerSecond`:
the loop is idle while it blocks on its mailbox for want of input (or mail), backpressured
while it blocks because an output channel ran out of credit, and busy the rest of the time
(processing records, handling mails, checkpointing). Totals are cumulative milliseconds;
the JobMaster turns two reports into milliseconds per second.

Mailbox thread only; time comes from the injected clock, read twice per blocking wait.

>>> from barrierflow._clock import ManualClock
>>> clock = ManualClock()
>>> time = MailboxTime(clock)
>>> time.start()
>>> clock.advance(30)             # busy
>>> time.wait(backpressured=False)
>>> clock.advance(50)             # idle
>>> time.resume()
>>> time.wait(backpressured=True)
>>> clock.advance(20)             # waiting for credit
>>> time.totals_ms()
(30.0, 50.0, 20.0)
"""

from __future__ import annotations

from barrierflow._clock import Clock

__all__ = ["MailboxTime"]


class MailboxTime:
    """Cumulative busy, idle and backpressured time of one attempt's mailbox loop."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._start: float | None = None
        self._idle_s = 0.0
        self._backpressured_s = 0.0
        self._waiting_since: float | None = None
        self._backpressured = False

    def start(self) -> None:
        """The loop begins: from now on, time not spent waiting is busy."""
        self._start = self._clock.monotonic()

    def wait(self, backpressured: bool) -> None:
        """The loop is about to block on its mailbox, for credit (`backpressured`) or input."""
        self._waiting_since = self._clock.monotonic()
        self._backpressured = backpressured

    def resume(self) -> None:
        """The loop stopped blocking (a mail came, or its wait timed out)."""
        since = self._waiting_since
        if since is None:
            return
        waited = self._clock.monotonic() - since
        self._waiting_since = None
        if self._backpressured:
            self._backpressured_s += waited
        else:
            self._idle_s += waited

    def totals_ms(self) -> tuple[float, float, float]:
        """(busy, idle, backpressured) milliseconds since `start` (to the microsecond), a wait
        in progress included; zeros before `start`."""
        if self._start is None:
            return (0.0, 0.0, 0.0)
        now = self._clock.monotonic()
        idle, backpressured = self._idle_s, self._backpressured_s
        if self._waiting_since is not None:
            if self._backpressured:
                backpressured += now - self._waiting_since
            else:
                idle += now - self._waiting_since
        busy = max(0.0, now - self._start - idle - backpressured)
        return (round(busy * 1000, 3), round(idle * 1000, 3), round(backpressured * 1000, 3))
