"""Operators on keyed streams: state is scoped to the key of the current record."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from barrierflow.api.functions import Function, KeyedProcessFunction, as_callable
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.heap_backend import HeapKeyedStateBackend


class KeyedOperator(StreamOperator):
    """Owns the keyed state backend of its key-group range and snapshots it per key group."""

    def __init__(self, uid: str, name: str, key_selector: Any) -> None:
        super().__init__(uid, name)
        self.key_selector = key_selector
        self._get_key = as_callable(key_selector, "get_key", "KeySelector")
        self.backend: HeapKeyedStateBackend | None = None

    def initialize_state(self, restored: RestoredState | None) -> None:
        assert self.context is not None
        self.backend = HeapKeyedStateBackend(
            self.context.key_group_range, self.context.max_parallelism
        )
        if restored is not None and restored.keyed:
            self.backend.restore(restored.keyed)

    def runtime_context(self) -> TaskRuntimeContext:
        return TaskRuntimeContext(self.context, self.backend)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        assert self.backend is not None
        return OperatorSnapshot(keyed=self.backend.snapshot())


class KeyedReduceOperator(KeyedOperator):
    """Emits the running reduction of each key after every record (Flink's keyed reduce)."""

    def __init__(self, uid: str, name: str, key_selector: Any, reduce_function: Any) -> None:
        super().__init__(uid, name, key_selector)
        self.reduce_function = reduce_function
        self._reduce = as_callable(reduce_function, "reduce", "ReduceFunction")

    def open(self) -> None:
        assert self.backend is not None
        self._accumulator = self.backend.get_value_state(ValueStateDescriptor("reduce"))
        if isinstance(self.reduce_function, Function):
            self.reduce_function.open(self.runtime_context())

    def process_batch(self, batch: list[Any]) -> list[Any]:
        backend, state, get_key, reduce = (
            self.backend,
            self._accumulator,
            self._get_key,
            self._reduce,
        )
        assert backend is not None
        out = []
        for value in batch:
            backend.set_current_key(get_key(value))
            current = state.value()
            result = value if current is None else reduce(current, value)
            state.update(result)
            out.append(result)
        return out


class _ProcessContext(KeyedProcessFunction.Context):
    def __init__(self, operator: KeyedProcessOperator) -> None:
        self._operator = operator

    def get_current_key(self) -> Any:
        backend = self._operator.backend
        assert backend is not None
        return backend.current_key


class KeyedProcessOperator(KeyedOperator):
    """Runs a KeyedProcessFunction; its outputs are whatever it returns or yields."""

    def __init__(self, uid: str, name: str, key_selector: Any, function: Any) -> None:
        super().__init__(uid, name, key_selector)
        if not isinstance(function, KeyedProcessFunction):
            raise TypeError(f"process() needs a KeyedProcessFunction, got {function!r}")
        self.function = function

    def open(self) -> None:
        self._ctx = _ProcessContext(self)
        self.function.open(self.runtime_context())

    def process_batch(self, batch: list[Any]) -> list[Any]:
        backend, get_key, process, ctx = (
            self.backend,
            self._get_key,
            self.function.process_element,
            self._ctx,
        )
        assert backend is not None
        out: list[Any] = []
        for value in batch:
            backend.set_current_key(get_key(value))
            produced: Iterable[Any] | None = process(value, ctx)
            if produced is not None:
                out.extend(produced)
        return out

    def close(self) -> None:
        self.function.close()
