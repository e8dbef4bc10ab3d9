"""The manual clock tests move by hand: production's `ManualClock`, in every shape asked for.

The code under test takes time three ways: a `Clock` (`monotonic` seconds, `epoch_millis`),
processing time as a callable returning milliseconds (`OperatorContext.processing_time`,
state TTL, watermark generators), and a callable returning monotonic seconds (`Pace`, pass
`clock.monotonic`). One class serves all three, so no test writes a clock of its own.

>>> clock = ManualClock(1_000)
>>> clock.advance(250)
1250
>>> clock(), clock.now, clock.monotonic()
(1250, 1250, 0.25)
>>> clock.now = 1_300
>>> clock()
1300
>>> clock.now = 900  # the wall clock may go back; monotonic time does not
>>> clock(), clock.monotonic()
(900, 0.3)
"""

from __future__ import annotations

from barrierflow._clock import ManualClock as _ProductionManualClock


class ManualClock(_ProductionManualClock):
    """Production's manual clock, also callable as processing time in milliseconds."""

    def __init__(self, now: int = 0) -> None:
        super().__init__(epoch_ms=now)

    def __call__(self) -> int:
        return self.epoch_millis()

    @property
    def now(self) -> int:
        """Processing time in milliseconds; tests set it to a scenario's next time."""
        return self.epoch_millis()

    @now.setter
    def now(self, millis: int) -> None:
        # Forward moves both clocks; back moves only the wall clock, as a wall clock may go
        # (some TTL scenarios restore "earlier"), and `monotonic` never goes back.
        if millis >= self.epoch_millis():
            self.advance(millis - self.epoch_millis())
        else:
            self._epoch_ms -= self.epoch_millis() - millis

    def advance(self, millis: int) -> int:
        """Move forward by `millis`; the new processing time."""
        super().advance(millis)
        return self.epoch_millis()
