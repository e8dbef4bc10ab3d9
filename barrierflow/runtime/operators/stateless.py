"""map, filter and flat_map: one user function per record, no state."""

from __future__ import annotations

from typing import Any

from barrierflow.api.functions import Function, as_callable
from barrierflow.runtime.operators.base import StreamOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext


class _UserFunctionOperator(StreamOperator):
    method = ""
    kind = ""

    def __init__(self, uid: str, name: str, function: Any) -> None:
        super().__init__(uid, name)
        self.function = function
        self._call = as_callable(function, self.method, self.kind)

    def open(self) -> None:
        if isinstance(self.function, Function):
            self.function.open(TaskRuntimeContext(self.context, None))

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()


class MapOperator(_UserFunctionOperator):
    method, kind = "map", "MapFunction"

    def process_batch(self, batch: list[Any]) -> list[Any]:
        call = self._call
        return [call(value) for value in batch]


class FilterOperator(_UserFunctionOperator):
    method, kind = "filter", "FilterFunction"

    def process_batch(self, batch: list[Any]) -> list[Any]:
        call = self._call
        return [value for value in batch if call(value)]


class FlatMapOperator(_UserFunctionOperator):
    method, kind = "flat_map", "FlatMapFunction"

    def process_batch(self, batch: list[Any]) -> list[Any]:
        call = self._call
        out: list[Any] = []
        extend = out.extend
        for value in batch:
            produced = call(value)
            if produced is not None:
                extend(produced)
        return out
