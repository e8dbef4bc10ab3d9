"""The window function classes, with PyFlink's names: `AggregateFunction`,
`ProcessWindowFunction` (and its `Context`), `WindowFunction`, `KeyedStateStore`.

`barrierflow.functions` re-exports them; `ReduceFunction` stays in
`barrierflow.core.functions`. A window's `reduce` also takes a plain two-argument
callable.

>>> class Average(AggregateFunction):
...     def create_accumulator(self):
...         return (0, 0)
...     def add(self, value, accumulator):
...         return (accumulator[0] + value, accumulator[1] + 1)
...     def get_result(self, accumulator):
...         return accumulator[0] / accumulator[1]
...     def merge(self, a, b):
...         return (a[0] + b[0], a[1] + b[1])
>>> average = Average()
>>> accumulator = average.create_accumulator()
>>> for value in [1, 2, 6]:
...     accumulator = average.add(value, accumulator)
>>> average.get_result(accumulator)
3.0
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from barrierflow.core.functions import Function
from barrierflow.core.state_descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

__all__ = [
    "AggregateFunction",
    "KeyedStateStore",
    "ProcessWindowFunction",
    "WindowFunction",
]


class AggregateFunction(Function, ABC):
    """Aggregates a window incrementally: one accumulator per window, never the elements.

    `add` and `merge` return the new accumulator (they may also change and return
    the one they were given). `merge` is used when session windows merge.
    """

    @abstractmethod
    def create_accumulator(self) -> Any:
        """A new, empty accumulator."""

    @abstractmethod
    def add(self, value: Any, accumulator: Any) -> Any:
        """Add `value` to `accumulator`; returns the updated accumulator."""

    @abstractmethod
    def get_result(self, accumulator: Any) -> Any:
        """The window's result for `accumulator`."""

    @abstractmethod
    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        """One accumulator holding both; returns it."""


class KeyedStateStore(ABC):
    """Keyed state scoped to one key and, for `window_state()`, to one window."""

    @abstractmethod
    def get_state(self, state_descriptor: ValueStateDescriptor) -> Any:
        """The `barrierflow.state.ValueState` for a `ValueStateDescriptor`."""

    @abstractmethod
    def get_list_state(self, state_descriptor: ListStateDescriptor) -> Any:
        """The `barrierflow.state.ListState` for a `ListStateDescriptor`."""

    @abstractmethod
    def get_map_state(self, state_descriptor: MapStateDescriptor) -> Any:
        """The `barrierflow.state.MapState` for a `MapStateDescriptor`."""

    @abstractmethod
    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> Any:
        """The `barrierflow.state.ReducingState` for a `ReducingStateDescriptor`."""

    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor) -> Any:
        """The `barrierflow.state.AggregatingState` for an `AggregatingStateDescriptor`."""
        raise NotImplementedError


class ProcessWindowFunction(Function, ABC):
    """Sees all elements of a window at once, with the window and the times.

    `process(key, context, elements)` returns or yields the window's results (or
    returns None for none); each is emitted with timestamp `window.max_timestamp()`.
    Combined with a reduce or an AggregateFunction, `elements` holds just the
    one pre-aggregated value.

    >>> class Count(ProcessWindowFunction):
    ...     def process(self, key, context, elements):
    ...         yield key, context.window().start, len(list(elements))
    """

    class Context(ABC):
        """What `process` and `clear` see of the window being evaluated."""

        @abstractmethod
        def window(self) -> Any:
            """The window (a `TimeWindow` has `.start` and `.end`)."""

        @abstractmethod
        def current_processing_time(self) -> int:
            """The current processing time (ms)."""

        @abstractmethod
        def current_watermark(self) -> int:
            """The current event-time watermark (ms)."""

        @abstractmethod
        def window_state(self) -> KeyedStateStore:
            """State of this key and window; clear it in `clear` (not for merging windows)."""

        @abstractmethod
        def global_state(self) -> KeyedStateStore:
            """State of this key, shared by all its windows."""

    @abstractmethod
    def process(
        self, key: Any, context: ProcessWindowFunction.Context, elements: Iterable[Any]
    ) -> Iterable[Any] | None:
        """Evaluate the window: return or yield its results."""

    def clear(self, context: ProcessWindowFunction.Context) -> None:
        """Called when the window is purged for good; clear its `window_state()` here."""


class WindowFunction(Function, ABC):
    """The older form of a window function: `apply(key, window, inputs)`."""

    @abstractmethod
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Iterable[Any] | None:
        """Evaluate the window: return or yield its results."""
