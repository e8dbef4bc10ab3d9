"""Session windows: one assigner, `SessionWindows`, behind PyFlink's four session names.

PyFlink's `EventTimeSessionWindows`, `ProcessingTimeSessionWindows` and their
`Dynamic...` variants differ in two parameters only: the time a session is measured
in (event or processing time) and its gap (static, or given by each element). Each
name here is `SessionWindows` with those two fixed, keeping PyFlink's constructors
and factories (`with_gap`, `with_dynamic_gap`) and its class names (operator names
show them).

>>> EventTimeSessionWindows.with_gap(30).assign_windows("e", 100, None)
[TimeWindow(start=100, end=130)]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from barrierflow.core.time import Duration, to_millis
from barrierflow.core.windows.assigners import (
    MergingWindowAssigner,
    event_timestamp,
    processing_time,
)
from barrierflow.core.windows.triggers import EventTimeTrigger, ProcessingTimeTrigger, Trigger
from barrierflow.core.windows.window import MergeCallback, TimeWindow
from barrierflow.errors import ConfigurationError

__all__ = [
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "SessionWindowTimeGapExtractor",
    "SessionWindows",
]


class SessionWindowTimeGapExtractor(ABC):
    """Gives each element its session gap (ms, or a Duration) for dynamic-gap sessions."""

    @abstractmethod
    def extract(self, element: Any) -> int | Duration: ...


GapExtractor = SessionWindowTimeGapExtractor | Callable[[Any], int | Duration]
"""A dynamic gap: a `SessionWindowTimeGapExtractor` or a plain callable on the element."""


class SessionWindows(MergingWindowAssigner):
    """Sessions: each element opens [time, time + gap); overlapping or touching ones merge.

    `event_time`: the time is the element's timestamp, else the processing time.
    The gap is `gap` ms for every element, or, with `gap_extractor`, each element's own.
    """

    def __init__(
        self,
        *,
        event_time: bool,
        gap: int | None = None,
        gap_extractor: GapExtractor | None = None,
    ) -> None:
        if (gap is None) == (gap_extractor is None):
            raise ConfigurationError("a session assigner takes either a gap or a gap extractor")
        self.event_time = event_time
        self.session_timeout = gap
        """The static gap (ms), None when each element gives its own."""
        self._extract = None if gap_extractor is None else _gap_extractor(gap_extractor)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[TimeWindow]:
        start = event_timestamp(timestamp) if self.event_time else processing_time(context)
        if self._extract is None:
            assert self.session_timeout is not None
            gap = self.session_timeout
        else:
            gap = _dynamic_gap(self._extract, element)
        return [TimeWindow(start, start + gap)]

    def merge_windows(self, windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
        TimeWindow.merge_windows(windows, callback)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger() if self.event_time else ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return self.event_time

    def __repr__(self) -> str:
        gap = self._extract if self.session_timeout is None else self.session_timeout
        return f"{type(self).__name__}({gap!r})"


def _static_gap(assigner: type, gap: int | Duration) -> int:
    millis = to_millis(gap, "session gap")
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
    gap = to_millis(extract(element), "dynamic session gap")
    if gap <= 0:
        raise ConfigurationError(f"Dynamic session time gap must satisfy 0 < gap, got {gap}")
    return gap


class EventTimeSessionWindows(SessionWindows):
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
        super().__init__(event_time=True, gap=session_timeout)

    @staticmethod
    def with_gap(size: int | Duration) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(_static_gap(EventTimeSessionWindows, size))

    @staticmethod
    def with_dynamic_gap(extractor: GapExtractor) -> DynamicEventTimeSessionWindows:
        """Sessions whose gap `extractor.extract(element)` (or `extractor(element)`) gives."""
        return DynamicEventTimeSessionWindows(extractor)


class DynamicEventTimeSessionWindows(SessionWindows):
    """Event-time sessions whose gap each element sets."""

    def __init__(self, extractor: GapExtractor) -> None:
        super().__init__(event_time=True, gap_extractor=extractor)

    @staticmethod
    def with_dynamic_gap(extractor: GapExtractor) -> DynamicEventTimeSessionWindows:
        return DynamicEventTimeSessionWindows(extractor)


class ProcessingTimeSessionWindows(SessionWindows):
    """Sessions in processing time: a session closes after `gap` of wall-clock silence."""

    def __init__(self, session_timeout: int) -> None:
        super().__init__(event_time=False, gap=session_timeout)

    @staticmethod
    def with_gap(size: int | Duration) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(_static_gap(ProcessingTimeSessionWindows, size))

    @staticmethod
    def with_dynamic_gap(extractor: GapExtractor) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)


class DynamicProcessingTimeSessionWindows(SessionWindows):
    """Processing-time sessions whose gap each element sets."""

    def __init__(self, extractor: GapExtractor) -> None:
        super().__init__(event_time=False, gap_extractor=extractor)

    @staticmethod
    def with_dynamic_gap(extractor: GapExtractor) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)
