"""Window assigners, with PyFlink's names and Flink's semantics: each element into windows.

A window assigner puts each element into windows and names the trigger used when
the job sets none; sessions are in `sessions.py`. Public as `barrierflow.window`:

    from barrierflow import Duration
    from barrierflow.window import TumblingEventTimeWindows

    stream.key_by(lambda e: e.user).window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))

Times and sizes are milliseconds: an int or a `barrierflow.Duration`.

>>> TumblingEventTimeWindows.of(Duration.of_seconds(10)).assign_windows("e", 12_345, None)
[TimeWindow(start=10000, end=20000)]
>>> SlidingEventTimeWindows.of(10, 5).assign_windows("e", 12, None)
[TimeWindow(start=10, end=20), TimeWindow(start=5, end=15)]

Caveats: an event-time window fires once the watermark reaches its
`max_timestamp()` (end - 1). An element is late when every window it belongs to
has `max_timestamp() + allowed lateness` at or before the watermark. Merging
(session) windows need a trigger that can merge.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from types import GenericAlias
from typing import Any

from barrierflow.core.time import Duration, to_millis
from barrierflow.core.windows.triggers import (
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    Trigger,
)
from barrierflow.core.windows.window import GlobalWindow, MergeCallback, TimeWindow, Window
from barrierflow.errors import ConfigurationError

__all__ = [
    "GlobalWindows",
    "MergingWindowAssigner",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "WindowAssigner",
    "event_timestamp",
    "processing_time",
]

_MIN_TIMESTAMP = -(2**63)
"""Flink's Long.MIN_VALUE, its marker for "no timestamp"."""


class WindowAssigner(ABC):
    """Assigns each element to zero or more windows."""

    __class_getitem__ = classmethod(GenericAlias)  # generic in PyFlink: Foo[IN, OUT]

    class WindowAssignerContext(ABC):
        """What an assigner can read: the current processing time."""

        @abstractmethod
        def get_current_processing_time(self) -> int: ...

        def get_runtime_context(self) -> Any:
            """The subtask's RuntimeContext (None outside a task)."""
            return None

    @abstractmethod
    def assign_windows(
        self, element: Any, timestamp: int, context: WindowAssigner.WindowAssignerContext
    ) -> Sequence[Window]:
        """The windows `element` (with event time `timestamp`) belongs to."""

    @abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger:
        """The trigger used when the job sets none (`env` is accepted for PyFlink)."""

    @abstractmethod
    def is_event_time(self) -> bool:
        """Whether windows are in event time (watermarks) rather than processing time."""

    def is_merging(self) -> bool:
        """Whether windows can merge (a `MergingWindowAssigner`)."""
        return False


class MergingWindowAssigner(WindowAssigner):
    """An assigner whose windows can merge, like sessions."""

    class MergeCallback(ABC):
        """Receives the merges `merge_windows` finds."""

        @abstractmethod
        def merge(self, to_be_merged: Iterable[Any], merge_result: Any) -> None: ...

    @abstractmethod
    def merge_windows(self, windows: Iterable[Any], callback: MergeCallback) -> None:
        """Report every group of `windows` that merges: `callback.merge(group, result)`."""

    def is_merging(self) -> bool:
        return True


def _size(value: int | Duration, what: str) -> int:
    return to_millis(value, what)


def event_timestamp(timestamp: Any) -> int:
    """`timestamp`, refused with a ConfigurationError when the record has none."""
    if timestamp is None or timestamp <= _MIN_TIMESTAMP:
        raise ConfigurationError(
            "a record has no timestamp, so event-time windows cannot place it: give the source "
            "a WatermarkStrategy with a timestamp assigner (or call "
            "assign_timestamps_and_watermarks), or use processing-time windows"
        )
    return timestamp


def processing_time(context: Any) -> int:
    """The assigner context's processing time (ConfigurationError without a context)."""
    if context is None:
        raise ConfigurationError("processing-time windows need the current processing time")
    return context.get_current_processing_time()


class _TumblingWindows(WindowAssigner):
    def __init__(self, size: int, offset: int) -> None:
        if size <= 0 or abs(offset) >= size:
            raise ConfigurationError(
                f"{type(self).__name__} parameters must satisfy abs(offset) < size "
                f"(size {size} ms, offset {offset} ms)"
            )
        self.size = size
        self.offset = offset

    def _assign(self, timestamp: int) -> list[TimeWindow]:
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.offset})"


class TumblingEventTimeWindows(_TumblingWindows):
    """Back-to-back windows of a fixed size in event time, aligned to the epoch (plus offset).

    >>> TumblingEventTimeWindows.of(Duration.of_hours(1), Duration.of_minutes(15)).assign_windows(
    ...     None, 0, None)
    [TimeWindow(start=-2700000, end=900000)]
    """

    @staticmethod
    def of(size: int | Duration, offset: int | Duration | None = None) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(
            _size(size, "window size"), 0 if offset is None else _size(offset, "window offset")
        )

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        return self._assign(event_timestamp(timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class TumblingProcessingTimeWindows(_TumblingWindows):
    """Back-to-back windows of a fixed size in processing time."""

    @staticmethod
    def of(
        size: int | Duration, offset: int | Duration | None = None
    ) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(
            _size(size, "window size"), 0 if offset is None else _size(offset, "window offset")
        )

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        return self._assign(processing_time(context))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class _SlidingWindows(WindowAssigner):
    def __init__(self, size: int, slide: int, offset: int) -> None:
        if abs(offset) >= slide or size <= 0:
            raise ConfigurationError(
                f"{type(self).__name__} parameters must satisfy abs(offset) < slide and size > 0 "
                f"(size {size} ms, slide {slide} ms, offset {offset} ms)"
            )
        self.size = size
        self.slide = slide
        self.offset = offset

    def _assign(self, timestamp: int) -> list[TimeWindow]:
        windows = []
        start = TimeWindow.get_window_start_with_offset(timestamp, self.offset, self.slide)
        while start > timestamp - self.size:
            windows.append(TimeWindow(start, start + self.size))
            start -= self.slide
        return windows

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.size}, {self.slide}, {self.offset})"


class SlidingEventTimeWindows(_SlidingWindows):
    """Windows of a fixed size every `slide` in event time; an element is in size/slide of them.

    Windows come latest first, as in Flink.
    """

    @staticmethod
    def of(
        size: int | Duration, slide: int | Duration, offset: int | Duration | None = None
    ) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(
            _size(size, "window size"),
            _size(slide, "window slide"),
            0 if offset is None else _size(offset, "window offset"),
        )

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        return self._assign(event_timestamp(timestamp))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class SlidingProcessingTimeWindows(_SlidingWindows):
    """Windows of a fixed size every `slide` in processing time."""

    @staticmethod
    def of(
        size: int | Duration, slide: int | Duration, offset: int | Duration | None = None
    ) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(
            _size(size, "window size"),
            _size(slide, "window slide"),
            0 if offset is None else _size(offset, "window offset"),
        )

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        return self._assign(processing_time(context))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class GlobalWindows(WindowAssigner):
    """Puts every element of a key into the one `GlobalWindow`; its default trigger never fires.

    >>> GlobalWindows.create().assign_windows("e", 5, None)
    [GlobalWindow]
    """

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[GlobalWindow]:
        return [GlobalWindow.get()]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"
