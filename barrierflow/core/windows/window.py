"""Windows: `TimeWindow` [start, end) and the one `GlobalWindow`, with Flink's semantics.

Both end up in keyed state and timers as namespaces, so they are pickled into
checkpoints and savepoints; they pickle under their public path
`barrierflow.window`, which `docs/savepoint-format.md` promises to keep.

>>> TimeWindow(0, 10).max_timestamp(), GlobalWindow.get().max_timestamp() == MAX_TIMESTAMP
(9, True)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from types import GenericAlias
from typing import Any, Protocol

from barrierflow.core.time import MAX_TIMESTAMP

__all__ = ["CountWindow", "GlobalWindow", "MergeCallback", "TimeWindow", "Window"]

_PUBLIC_MODULE = "barrierflow.window"
"""Where pickles (savepoints, state-processor frames) name the windows: their public path."""


class Window(ABC):
    """A group of elements; `max_timestamp()` is the last time that still belongs to it."""

    __class_getitem__ = classmethod(GenericAlias)  # generic in PyFlink: Foo[IN, OUT]

    @abstractmethod
    def max_timestamp(self) -> int:
        """The largest timestamp in the window (ms)."""


class MergeCallback(Protocol):
    """Receives each group of windows that merges (`MergingWindowAssigner.MergeCallback`)."""

    def merge(self, to_be_merged: Iterable[Any], merge_result: Any) -> None: ...


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

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled as a call (as GlobalWindow): a slotted dataclass's default state goes
        # through a Python-level `fields()` per window, a checkpoint's cost with many
        return (TimeWindow, (self.start, self.end))

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
    def merge_windows(windows: Iterable[TimeWindow], callback: MergeCallback) -> None:
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


@dataclass(frozen=True, order=True, slots=True)
class CountWindow(Window):
    """The `id`-th window of a key's count windows (PyFlink's CountWindow): it ends with
    the end of time, so only its trigger fires it, never a watermark or a clock.

    >>> CountWindow(3), CountWindow(3).max_timestamp() == MAX_TIMESTAMP
    (CountWindow(id=3), True)
    """

    id: int

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __reduce__(self) -> tuple[Any, ...]:
        return (CountWindow, (self.id,))


# Set after the classes are built: a dataclass reads its module's namespace while it builds.
TimeWindow.__module__ = _PUBLIC_MODULE
GlobalWindow.__module__ = _PUBLIC_MODULE
CountWindow.__module__ = _PUBLIC_MODULE
