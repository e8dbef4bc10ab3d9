"""User function classes, with PyFlink's names. Plain callables work wherever a
function object is accepted."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any


class RuntimeContext(ABC):
    """What a function sees of the subtask it runs in."""

    @abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_attempt_number(self) -> int: ...

    @abstractmethod
    def get_state(self, descriptor: Any) -> Any:
        """Keyed `ValueState` for a `ValueStateDescriptor` (keyed streams only)."""

    def get_list_state(self, descriptor: Any) -> Any:
        """Keyed `ListState` for a `ListStateDescriptor` (keyed streams only)."""
        raise NotImplementedError

    def get_map_state(self, descriptor: Any) -> Any:
        """Keyed `MapState` for a `MapStateDescriptor` (keyed streams only)."""
        raise NotImplementedError


class Function:
    """Base of function classes: `open`/`close` bracket the function's life in a task."""

    def open(self, runtime_context: RuntimeContext) -> None:
        """Called once before the first record (after state is restored)."""

    def close(self) -> None:
        """Called once when the task ends normally."""


class MapFunction(Function, ABC):
    @abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function, ABC):
    @abstractmethod
    def flat_map(self, value: Any) -> Iterable[Any]: ...


class FilterFunction(Function, ABC):
    @abstractmethod
    def filter(self, value: Any) -> bool: ...


class ReduceFunction(Function, ABC):
    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class KeySelector(Function, ABC):
    @abstractmethod
    def get_key(self, value: Any) -> Any: ...


class TimeDomain(enum.Enum):
    """Which clock fired a timer (PyFlink's `TimeDomain`)."""

    EVENT_TIME = 0
    """The watermark passed the timer's timestamp."""
    PROCESSING_TIME = 1
    """The task's wall clock passed the timer's timestamp."""


class TimerService(ABC):
    """Timers and clocks of the current key (PyFlink's `TimerService`).

    Timestamps are epoch milliseconds. A timer is registered at most once per key and
    timestamp; it is part of every checkpoint.
    """

    @abstractmethod
    def current_processing_time(self) -> int:
        """The task's wall-clock time in milliseconds."""

    @abstractmethod
    def current_watermark(self) -> int:
        """The operator's current event time (`-2**63` before the first watermark)."""

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call `on_timer` once the wall clock reaches `timestamp`."""

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None:
        """Call `on_timer` once the watermark reaches `timestamp`."""

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Forget a processing-time timer of the current key (no-op if there is none)."""

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None:
        """Forget an event-time timer of the current key (no-op if there is none)."""


class ProcessFunction(Function, ABC):
    """Processes each record, with its timestamp, side outputs and the clocks.

    `process_element` returns or yields its outputs (or returns None for none); an
    output `(output_tag, value)` goes to that side output, as in PyFlink, and so does
    `ctx.output(output_tag, value)`. Timers need a keyed stream (`KeyedProcessFunction`).
    """

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int | None:
            """The event timestamp of the current record (None if it has none)."""

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def output(self, output_tag: Any, value: Any) -> None:
            """Emit `value` to the side output `output_tag`."""

    @abstractmethod
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None: ...


class KeyedProcessFunction(Function, ABC):
    """Processes each record of a keyed stream with keyed state and timers.

    `process_element` and `on_timer` return or yield their outputs (or return None for
    none); an output `(output_tag, value)` goes to that side output (PyFlink's way),
    and so does `ctx.output(output_tag, value)`. Outputs of `process_element` carry the
    record's timestamp; outputs of an event-time `on_timer` carry the timer's
    timestamp, those of a processing-time one carry none (as in Flink).
    """

    class Context(ABC):
        @abstractmethod
        def get_current_key(self) -> Any: ...

        def timestamp(self) -> int | None:
            """The event timestamp of the current record or timer (None if none)."""
            raise NotImplementedError

        def timer_service(self) -> TimerService:
            raise NotImplementedError

        def output(self, output_tag: Any, value: Any) -> None:
            """Emit `value` to the side output `output_tag`."""
            raise NotImplementedError

    class OnTimerContext(Context):
        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """Whether the watermark or the wall clock fired the timer."""

    @abstractmethod
    def process_element(
        self, value: Any, ctx: KeyedProcessFunction.Context
    ) -> Iterable[Any] | None: ...

    def on_timer(
        self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        """A timer registered for the current key fired at `timestamp`."""


def as_callable(function: Any, method: str, kind: str) -> Callable[..., Any]:
    """The callable behind a function object (its `method`) or a plain callable."""
    bound = getattr(function, method, None)
    if callable(bound) and isinstance(function, Function):
        return bound
    if callable(function):
        return function
    raise TypeError(
        f"{kind} must be a callable or a {kind} object with .{method}(), got {function!r}"
    )
