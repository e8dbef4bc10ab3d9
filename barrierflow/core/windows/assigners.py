"""Windows, window assigners and triggers, with PyFlink's names and Flink's semantics.

A window assigner puts each element into windows; a trigger decides when a
window is evaluated (FIRE) and when its contents are dropped (PURGE).

    from barrierflow import Duration
    from barrierflow.window import TumblingEventTimeWindows

    stream.key_by(lambda e: e.user).window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))

Times and sizes are milliseconds: an int or a `barrierflow.Duration`.

>>> TumblingEventTimeWindows.of(Duration.of_seconds(10)).assign_windows("e", 12_345, None)
[TimeWindow(start=10000, end=20000)]
>>> SlidingEventTimeWindows.of(10, 5).assign_windows("e", 12, None)
[TimeWindow(start=10, end=20), TimeWindow(start=5, end=15)]
>>> EventTimeSessionWindows.with_gap(30).assign_windows("e", 100, None)
[TimeWindow(start=100, end=130)]

Caveats: an event-time window fires once the watermark reaches its
`max_timestamp()` (end - 1). An element is late when every window it belongs to
has `max_timestamp() + allowed lateness` at or before the watermark. Merging
(session) windows need a trigger that can merge.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from barrierflow.core.time import Duration, to_millis
from barrierflow.core.triggers import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from barrierflow.errors import ConfigurationError

__all__ = [
    "MAX_TIMESTAMP",
    "ContinuousEventTimeTrigger",
    "CountTrigger",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "GlobalWindow",
    "GlobalWindows",
    "MergingWindowAssigner",
    "NeverTrigger",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeWindow",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
]

MAX_TIMESTAMP = 2**63 - 1
"""The end of time (Flink's Long.MAX_VALUE): the max timestamp of the global window."""

_MIN_TIMESTAMP = -(2**63)
"""Flink's Long.MIN_VALUE, its marker for "no timestamp"."""


# =============================================================================================
# Windows
# =============================================================================================


class Window(ABC):
    """A group of elements; `max_timestamp()` is the last time that still belongs to it."""

    @abstractmethod
    def max_timestamp(self) -> int:
        """The largest timestamp in the window (ms)."""


@dataclass(frozen=True, order=True, slots=True)
class TimeWindow(Window):
    """The time interval [start, end): `start` inclusive, `end` exclusive (ms).

    >>> w = TimeWindow(0, 10)
    >>> w.max_timestamp()
    9
    >>> w.intersects(TimeWindow(10, 20)), w.cover(TimeWindow(5, 15))
    (True, TimeWindow(start=0, end=15))
    """

    start: int
    end: int

    def max_timestamp(self) -> int:
        """`end - 1`."""
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        """Whether the windows overlap or touch: start <= other.end and end >= other.start."""
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        """The smallest window containing both."""
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """The start of the window of `window_size` that holds `timestamp`, windows being
        aligned to `offset` (also for negative timestamps).

        >>> TimeWindow.get_window_start_with_offset(-1, 0, 10)
        -10
        >>> TimeWindow.get_window_start_with_offset(12, 3, 5)
        8
        """
        # Python's % is the floor modulo Flink computes with its remainder < 0 correction.
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable[TimeWindow], callback: Any) -> None:
        """Merge overlapping (or touching) windows: `callback.merge(merged, result)` for each
        group of two or more, windows taken in order of start (Flink's TimeWindow.mergeWindows).
        """
        merged: list[tuple[TimeWindow, dict[TimeWindow, None]]] = []
        current: tuple[TimeWindow, dict[TimeWindow, None]] | None = None
        for candidate in sorted(windows, key=_window_start):
            if current is None:
                current = (candidate, {candidate: None})
            elif current[0].intersects(candidate):
                current[1][candidate] = None
                current = (current[0].cover(candidate), current[1])
            else:
                merged.append(current)
                current = (candidate, {candidate: None})
        if current is not None:
            merged.append(current)
        for result, members in merged:
            if len(members) > 1:
                callback.merge(list(members), result)


def _window_start(window: TimeWindow) -> int:
    return window.start


class GlobalWindow(Window):
    """The one window that holds every element (of a key); it never ends.

    >>> GlobalWindow.get() is GlobalWindow()
    True
    >>> GlobalWindow.get().max_timestamp() == MAX_TIMESTAMP
    True
    """

    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @staticmethod
    def get() -> GlobalWindow:
        """The global window."""
        return GlobalWindow()

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalWindow)

    def __hash__(self) -> int:
        return 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (GlobalWindow, ())

    def __repr__(self) -> str:
        return "GlobalWindow"


# =============================================================================================
# Window assigners
# =============================================================================================


class WindowAssigner(ABC):
    """Assigns each element to zero or more windows."""

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
    ) -> list[Any]:
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
    def merge_windows(self, windows: Iterable[Any], callback: Any) -> None:
        """Report every group of `windows` that merges: `callback.merge(group, result)`."""

    def is_merging(self) -> bool:
        return True


def _size(value: int | Duration, what: str) -> int:
    return to_millis(value, what)


def _event_timestamp(timestamp: Any) -> int:
    if timestamp is None or timestamp <= _MIN_TIMESTAMP:
        raise ConfigurationError(
            "a record has no timestamp, so event-time windows cannot place it: give the source "
            "a WatermarkStrategy with a timestamp assigner (or call "
            "assign_timestamps_and_watermarks), or use processing-time windows"
        )
    return timestamp


def _processing_time(context: Any) -> int:
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
        return self._assign(_event_timestamp(timestamp))

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
        return self._assign(_processing_time(context))

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
        return self._assign(_event_timestamp(timestamp))

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
        return self._assign(_processing_time(context))

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False


class SessionWindowTimeGapExtractor(ABC):
    """Gives each element its session gap (ms, or a Duration) for dynamic-gap sessions."""

    @abstractmethod
    def extract(self, element: Any) -> int | Duration: ...


class _SessionWindows(MergingWindowAssigner):
    """Sessions: each element opens [time, time + gap); overlapping or touching ones merge."""

    def merge_windows(self, windows: Iterable[TimeWindow], callback: Any) -> None:
        TimeWindow.merge_windows(windows, callback)


def _static_gap(assigner: type, gap: int | Duration) -> int:
    millis = _size(gap, "session gap")
    if millis <= 0:
        raise ConfigurationError(f"{assigner.__name__} parameters must satisfy 0 < size")
    return millis


def _gap_extractor(extractor: Any) -> Callable[[Any], Any]:
    extract = getattr(extractor, "extract", None)
    if isinstance(extractor, SessionWindowTimeGapExtractor) and callable(extract):
        return extract
    if callable(extractor):
        return extractor
    raise ConfigurationError(
        f"a session gap extractor must be a SessionWindowTimeGapExtractor or a callable, "
        f"got {extractor!r}"
    )


def _dynamic_gap(extract: Callable[[Any], Any], element: Any) -> int:
    gap = _size(extract(element), "dynamic session gap")
    if gap <= 0:
        raise ConfigurationError(f"Dynamic session time gap must satisfy 0 < gap, got {gap}")
    return gap


class EventTimeSessionWindows(_SessionWindows):
    """Sessions in event time: a session closes after `gap` without elements of its key.

    >>> sessions = EventTimeSessionWindows.with_gap(10)
    >>> merged = []
    >>> class Collect:
    ...     def merge(self, windows, result):
    ...         merged.append((sorted(windows), result))
    >>> windows = [TimeWindow(0, 10), TimeWindow(5, 15), TimeWindow(30, 40)]
    >>> sessions.merge_windows(windows, Collect())
    >>> merged
    [([TimeWindow(start=0, end=10), TimeWindow(start=5, end=15)], TimeWindow(start=0, end=15))]
    """

    def __init__(self, session_timeout: int) -> None:
        self.session_timeout = session_timeout

    @staticmethod
    def with_gap(size: int | Duration) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_static_gap(EventTimeSessionWindows, size))

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicEventTimeSessionWindows:
        """Sessions whose gap `extractor.extract(element)` (or `extractor(element)`) gives."""
        return DynamicEventTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        timestamp = _event_timestamp(timestamp)
        return [TimeWindow(timestamp, timestamp + self.session_timeout)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"EventTimeSessionWindows({self.session_timeout})"


class DynamicEventTimeSessionWindows(_SessionWindows):
    """Event-time sessions whose gap each element sets."""

    def __init__(self, extractor: Any) -> None:
        self._extract = _gap_extractor(extractor)

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        timestamp = _event_timestamp(timestamp)
        return [TimeWindow(timestamp, timestamp + _dynamic_gap(self._extract, element))]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class ProcessingTimeSessionWindows(_SessionWindows):
    """Sessions in processing time: a session closes after `gap` of wall-clock silence."""

    def __init__(self, session_timeout: int) -> None:
        self.session_timeout = session_timeout

    @staticmethod
    def with_gap(size: int | Duration) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_static_gap(ProcessingTimeSessionWindows, size))

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        now = _processing_time(context)
        return [TimeWindow(now, now + self.session_timeout)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"ProcessingTimeSessionWindows({self.session_timeout})"


class DynamicProcessingTimeSessionWindows(_SessionWindows):
    """Processing-time sessions whose gap each element sets."""

    def __init__(self, extractor: Any) -> None:
        self._extract = _gap_extractor(extractor)

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        now = _processing_time(context)
        return [TimeWindow(now, now + _dynamic_gap(self._extract, element))]

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
