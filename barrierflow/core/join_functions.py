"""The user functions of joins, with Flink's names in snake_case.

- `ProcessJoinFunction`: called once per pair an interval join finds, with the pair's
  timestamps in its context.
- `JoinFunction` / `FlatJoinFunction`: called once per pair a window join finds, with
  one result / any number of results.
- `CoGroupFunction`: called once per key and window with all elements of both sides.

Functions return or yield their outputs (`process_element`, `co_group`,
`FlatJoinFunction.join`) or return the one output (`JoinFunction.join`); plain
callables with the same parameters work wherever a function object is accepted.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from barrierflow.core.functions import Function

__all__ = [
    "CoGroupFunction",
    "FlatJoinFunction",
    "JoinFunction",
    "ProcessJoinFunction",
    "as_co_group",
    "as_flat_join",
    "as_process_join",
    "outputs_of",
]


class ProcessJoinFunction(Function, ABC):
    """Processes one pair found by an interval join; returns or yields its outputs.

    Every output is emitted with the pair's timestamp, the greater of the two.
    """

    class Context(ABC):
        """The timestamps of the pair being processed."""

        @abstractmethod
        def get_left_timestamp(self) -> int:
            """The timestamp of the pair's left element."""

        @abstractmethod
        def get_right_timestamp(self) -> int:
            """The timestamp of the pair's right element."""

        @abstractmethod
        def get_timestamp(self) -> int:
            """The timestamp of the pair: the greater of its two elements' timestamps."""

    @abstractmethod
    def process_element(
        self, left: Any, right: Any, ctx: ProcessJoinFunction.Context
    ) -> Iterable[Any] | None: ...


class JoinFunction(Function, ABC):
    """Joins one pair of a window join into exactly one output."""

    @abstractmethod
    def join(self, first: Any, second: Any) -> Any: ...


class FlatJoinFunction(Function, ABC):
    """Joins one pair of a window join into any number of outputs (returned or yielded)."""

    @abstractmethod
    def join(self, first: Any, second: Any) -> Iterable[Any] | None: ...


class CoGroupFunction(Function, ABC):
    """Sees all elements of both sides for one key and window; returns or yields outputs.

    Either side may be empty (but not both): a co-group is an outer join.
    """

    @abstractmethod
    def co_group(self, first: list[Any], second: list[Any]) -> Iterable[Any] | None: ...


def outputs_of(returned: Any) -> Iterable[Any]:
    """The outputs of a function that returns or yields them (None: no output)."""
    return () if returned is None else returned


def _callable(function: Any, cls: type, method: str, what: str) -> Callable[..., Any]:
    if isinstance(function, cls):
        return getattr(function, method)
    if isinstance(function, Function) or not callable(function):
        raise TypeError(f"{what} must be a {cls.__name__} or a callable, got {function!r}")
    return function


def as_process_join(function: Any) -> Callable[[Any, Any, Any], Iterable[Any] | None]:
    """`process_element` of a `ProcessJoinFunction`, or a plain `f(left, right, ctx)`."""
    return _callable(function, ProcessJoinFunction, "process_element", "an interval join function")


def as_flat_join(function: Any) -> Callable[[Any, Any], Iterable[Any]]:
    """A `JoinFunction`, `FlatJoinFunction` or plain `f(first, second)` (one output) as a
    function returning the outputs of one pair."""
    if isinstance(function, FlatJoinFunction):
        flat = function.join
        return lambda first, second: outputs_of(flat(first, second))
    join = _callable(function, JoinFunction, "join", "a join function")
    return lambda first, second: (join(first, second),)


def as_co_group(function: Any) -> Callable[[list[Any], list[Any]], Iterable[Any] | None]:
    """`co_group` of a `CoGroupFunction`, or a plain `f(first, second)`."""
    return _callable(function, CoGroupFunction, "co_group", "a co-group function")
