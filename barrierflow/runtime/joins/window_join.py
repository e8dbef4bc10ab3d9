"""The pieces of Flink's window join and co-group, which are built from a union.

Flink has no window-join operator. `a.join(b).where(ka).equal_to(kb).window(w).apply(f)`
becomes: tag the elements of each input (`TaggedUnion.one` / `TaggedUnion.two`), union
the two tagged streams, key the union by `UnionKeySelector(ka, kb)`, window it with `w`,
and apply `CoGroupWindowFunction(JoinCoGroupFunction(f))` to each key and window. The
window mechanics are the windowing package's; this module holds what is particular to
joins, all of it pure:

- `CoGroupWindowFunction.apply(key, window, inputs)` splits a window's contents back
  into the first and the second input, each in arrival order, and calls the co-group
  function once (either side may be empty);
- `JoinCoGroupFunction` turns a join function into a co-group function: a nested loop
  over the first side (outer) and the second (inner), both in arrival order. That is
  the order of Flink's results too.

>>> contents = [TaggedUnion.one("a1"), TaggedUnion.two("b1"), TaggedUnion.one("a2"),
...             TaggedUnion.two("b2")]
>>> join_window_contents(contents, lambda a, b: a + "+" + b)
['a1+b1', 'a1+b2', 'a2+b1', 'a2+b2']
>>> join_window_contents([TaggedUnion.one("a1")], lambda a, b: a + "+" + b)
[]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from barrierflow.core.functions import Function, KeySelector, as_callable
from barrierflow.core.join_functions import (
    CoGroupFunction,
    as_co_group,
    as_flat_join,
    outputs_of,
)

__all__ = [
    "CoGroupWindowFunction",
    "JoinCoGroupFunction",
    "TaggedUnion",
    "UnionKeySelector",
    "co_group_window_contents",
    "join_window_contents",
    "tag_first",
    "tag_second",
]


@dataclass(frozen=True, slots=True)
class TaggedUnion:
    """An element of the union of a co-group's two inputs, tagged with its input."""

    value: Any
    is_one: bool
    """True for the first input (`where`), False for the second (`equal_to`)."""

    @staticmethod
    def one(value: Any) -> TaggedUnion:
        return TaggedUnion(value, True)

    @staticmethod
    def two(value: Any) -> TaggedUnion:
        return TaggedUnion(value, False)

    @property
    def is_two(self) -> bool:
        return not self.is_one

    def get_one(self) -> Any:
        if not self.is_one:
            raise ValueError(f"{self!r} comes from the second input")
        return self.value

    def get_two(self) -> Any:
        if self.is_one:
            raise ValueError(f"{self!r} comes from the first input")
        return self.value


def tag_first(value: Any) -> TaggedUnion:
    """The map of the first input before the union (Flink's `Input1Tagger`)."""
    return TaggedUnion(value, True)


def tag_second(value: Any) -> TaggedUnion:
    """The map of the second input before the union (Flink's `Input2Tagger`)."""
    return TaggedUnion(value, False)


class UnionKeySelector(KeySelector):
    """Keys a tagged element with its own input's key selector."""

    def __init__(self, first_key: Any, second_key: Any) -> None:
        self.first_key = first_key
        self.second_key = second_key
        self._first = as_callable(first_key, "get_key", "KeySelector")
        self._second = as_callable(second_key, "get_key", "KeySelector")

    def get_key(self, value: TaggedUnion) -> Any:
        return self._first(value.value) if value.is_one else self._second(value.value)

    def __getstate__(self) -> dict[str, Any]:
        return {"first_key": self.first_key, "second_key": self.second_key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["first_key"], state["second_key"])  # type: ignore[misc]


class JoinCoGroupFunction(CoGroupFunction):
    """A join function as a co-group function: every pair, first side outer, in order.

    Takes a `JoinFunction` (one output per pair), a `FlatJoinFunction` (any number) or
    a plain `f(first, second)` (one output).
    """

    def __init__(self, join_function: Any) -> None:
        self.join_function = join_function
        self._join = as_flat_join(join_function)

    def co_group(self, first: list[Any], second: list[Any]) -> Iterable[Any]:
        join = self._join
        for left in first:
            for right in second:
                yield from join(left, right)

    def open(self, runtime_context: Any) -> None:
        _forward_open(self.join_function, runtime_context)

    def close(self) -> None:
        _forward_close(self.join_function)

    def __getstate__(self) -> dict[str, Any]:
        return {"join_function": self.join_function}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["join_function"])  # type: ignore[misc]


class CoGroupWindowFunction:
    """The window function of a co-group: splits a window's contents by input, calls the
    co-group function once, returns its outputs (Flink's `CoGroupWindowFunction`).

    Its `apply(key, window, inputs)` is PyFlink's `WindowFunction` signature.
    """

    def __init__(self, co_group_function: Any) -> None:
        self.co_group_function = co_group_function
        self._co_group = as_co_group(co_group_function)

    def apply(self, key: Any, window: Any, inputs: Iterable[TaggedUnion]) -> list[Any]:
        first: list[Any] = []
        second: list[Any] = []
        for element in inputs:
            (first if element.is_one else second).append(element.value)
        return list(outputs_of(self._co_group(first, second)))

    def open(self, runtime_context: Any) -> None:
        _forward_open(self.co_group_function, runtime_context)

    def close(self) -> None:
        _forward_close(self.co_group_function)

    def __getstate__(self) -> dict[str, Any]:
        return {"co_group_function": self.co_group_function}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["co_group_function"])  # type: ignore[misc]


def _forward_open(function: Any, runtime_context: Any) -> None:
    if isinstance(function, Function):
        function.open(runtime_context)


def _forward_close(function: Any) -> None:
    if isinstance(function, Function):
        function.close()


def co_group_window_contents(elements: Iterable[TaggedUnion], co_group_function: Any) -> list[Any]:
    """The outputs of a co-group for one key and window, given the window's contents."""
    return CoGroupWindowFunction(co_group_function).apply(None, None, elements)


def join_window_contents(elements: Iterable[TaggedUnion], join_function: Any) -> list[Any]:
    """The joined outputs for one key and window, in Flink's order."""
    return co_group_window_contents(elements, JoinCoGroupFunction(join_function))
