"""Functions over two connected streams, with PyFlink's names: `CoProcessFunction`,
`KeyedCoProcessFunction`, `CoMapFunction`, `CoFlatMapFunction`.

`process_element1` sees the records of the first stream (the one `connect` was
called on), `process_element2` those of the second. Outputs are returned or
yielded, as in a `ProcessFunction`; `(output_tag, value)` or `ctx.output(tag, value)`
goes to a side output.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

from barrierflow.core.functions import Function, KeyedProcessFunction, ProcessFunction

__all__ = [
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
]


class CoProcessFunction(Function, ABC):
    """Processes the records of two connected, non-keyed streams (no timers, as in Flink)."""

    Context = ProcessFunction.Context

    @abstractmethod
    def process_element1(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None:
        """A record of the first stream."""

    @abstractmethod
    def process_element2(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None:
        """A record of the second stream."""


class KeyedCoProcessFunction(Function, ABC):
    """Processes the records of two connected streams keyed alike, with keyed state
    (shared by both inputs) and timers, like a `KeyedProcessFunction`."""

    Context = KeyedProcessFunction.Context
    OnTimerContext = KeyedProcessFunction.OnTimerContext

    @abstractmethod
    def process_element1(
        self, value: Any, ctx: KeyedProcessFunction.Context
    ) -> Iterable[Any] | None:
        """A record of the first stream; the current key is its key."""

    @abstractmethod
    def process_element2(
        self, value: Any, ctx: KeyedProcessFunction.Context
    ) -> Iterable[Any] | None:
        """A record of the second stream; the current key is its key."""

    def on_timer(
        self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        """A timer registered for the current key fired at `timestamp`."""


class CoMapFunction(Function, ABC):
    """One output per record: `map1` for the first stream, `map2` for the second."""

    @abstractmethod
    def map1(self, value: Any) -> Any: ...

    @abstractmethod
    def map2(self, value: Any) -> Any: ...


class CoFlatMapFunction(Function, ABC):
    """Any number of outputs per record: `flat_map1` / `flat_map2` return an iterable."""

    @abstractmethod
    def flat_map1(self, value: Any) -> Iterable[Any] | None: ...

    @abstractmethod
    def flat_map2(self, value: Any) -> Iterable[Any] | None: ...


class _CoMapAsProcess(CoProcessFunction):
    """A CoMapFunction run by the co-process operator."""

    def __init__(self, function: CoMapFunction) -> None:
        self.function = function

    def open(self, runtime_context: Any) -> None:
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any]:
        return (self.function.map1(value),)

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any]:
        return (self.function.map2(value),)


class _CoFlatMapAsProcess(_CoMapAsProcess):
    """A CoFlatMapFunction run by the co-process operator."""

    def process_element1(self, value: Any, ctx: Any) -> Iterable[Any]:
        return self.function.flat_map1(value) or ()

    def process_element2(self, value: Any, ctx: Any) -> Iterable[Any]:
        return self.function.flat_map2(value) or ()
