"""map, flat_map and filter on a keyed stream (PyFlink's `KeyedStream.map` ...): the user
function runs inside a KeyedProcessFunction, so its `open` gets a runtime context with the
keyed state of the current record's key (`get_state`, `get_list_state`, `get_map_state`,
`get_reducing_state`, `get_aggregating_state`), as in PyFlink."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from barrierflow.core.functions import (
    Function,
    KeyedProcessFunction,
    RuntimeContext,
    as_callable,
)


class _KeyedUserFunction(KeyedProcessFunction):
    """Wraps a map, flat_map or filter function: `open`/`close` reach it, records too."""

    method = ""
    kind = ""

    def __init__(self, function: Any) -> None:
        self.function = function
        self._call = as_callable(function, self.method, self.kind)

    def open(self, runtime_context: RuntimeContext) -> None:
        if isinstance(self.function, Function):
            self.function.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()


class KeyedMap(_KeyedUserFunction):
    method, kind = "map", "MapFunction"

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        return (self._call(value),)


class KeyedFlatMap(_KeyedUserFunction):
    method, kind = "flat_map", "FlatMapFunction"

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any] | None:
        return self._call(value)


class KeyedFilter(_KeyedUserFunction):
    method, kind = "filter", "FilterFunction"

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        return (value,) if self._call(value) else ()
