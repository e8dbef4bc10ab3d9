"""User function classes, with PyFlink's names. Plain callables work wherever a
function object is accepted."""

from __future__ import annotations

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


class KeyedProcessFunction(Function, ABC):
    """Processes each record of a keyed stream with access to keyed state.

    `process_element` returns or yields its outputs (or returns None for none).
    """

    class Context(ABC):
        @abstractmethod
        def get_current_key(self) -> Any: ...

    @abstractmethod
    def process_element(
        self, value: Any, ctx: KeyedProcessFunction.Context
    ) -> Iterable[Any] | None: ...


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
