"""Drives a WindowLogic over its in-memory twins, as the window operator will drive it
over the keyed state backend and the timer service: elements in, watermarks and
processing time advanced by hand, every due timer fired in order."""

from __future__ import annotations

from typing import Any

from barrierflow.runtime.watermarks import MIN_WATERMARK
from barrierflow.runtime.windowing import (
    AggregateFunction,
    InMemoryWindowState,
    InMemoryWindowTimers,
    LateElement,
    WindowLogic,
    WindowResult,
)


def add(a: Any, b: Any) -> Any:
    return a + b


class Average(AggregateFunction):
    """The mean, with a (sum, count) accumulator."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


class WindowHarness:
    """One WindowLogic with its state, timers, watermark and clock."""

    def __init__(
        self,
        assigner: Any,
        contents: Any,
        *,
        state: InMemoryWindowState | None = None,
        timers: InMemoryWindowTimers | None = None,
        watermark: int = MIN_WATERMARK,
        processing_time: int = 0,
        **options: Any,
    ) -> None:
        self.state = InMemoryWindowState() if state is None else state
        self.timers = InMemoryWindowTimers() if timers is None else timers
        self.logic = WindowLogic(assigner, contents, self.state, self.timers, **options)
        self.watermark = watermark
        self.processing_time = processing_time

    def element(self, value: Any, timestamp: int | None, key: Any = "k") -> list[Any]:
        return self.logic.process_element(
            key, value, timestamp, self.watermark, self.processing_time
        )

    def advance_watermark(self, watermark: int) -> list[Any]:
        """Set the watermark, then fire every due event-time timer (new ones too)."""
        self.watermark = watermark
        out: list[Any] = []
        while (timer := self.timers.poll_event_time_timer(watermark)) is not None:
            out += self.logic.on_event_time(
                timer.key, timer.window, timer.timestamp, watermark, self.processing_time
            )
        return out

    def advance_processing_time(self, now: int) -> list[Any]:
        """Set the clock, then fire every due processing-time timer (new ones too)."""
        self.processing_time = now
        out: list[Any] = []
        while (timer := self.timers.poll_processing_time_timer(now)) is not None:
            out += self.logic.on_processing_time(
                timer.key, timer.window, timer.timestamp, self.watermark, now
            )
        return out

    def is_empty(self) -> bool:
        """No state and no timers left."""
        return (
            len(self.state) == 0
            and not self.timers.event_time_timers()
            and not self.timers.processing_time_timers()
        )


def results(emitted: list[Any]) -> list[tuple[Any, int]]:
    """The window results, as (value, timestamp); fails on a late element."""
    assert all(isinstance(item, WindowResult) for item in emitted), emitted
    return [(item.value, item.timestamp) for item in emitted]


def late(emitted: list[Any]) -> list[tuple[Any, int]]:
    """The late elements, as (value, timestamp); fails on a window result."""
    assert all(isinstance(item, LateElement) for item in emitted), emitted
    return [(item.value, item.timestamp) for item in emitted]
