"""`ReducingState` and `AggregatingState` as handles over a `ValueState`.

Both keep one folded value per key: the reduced value, or the AggregateFunction's
accumulator. Built over the `ValueState` of any backend (and over a TTL value handle,
`barrierflow.state.ttl`), so every backend has them without code of its own, and a
snapshot stores them as value state under the descriptor's name.

>>> from barrierflow.state.heap_backend import HeapKeyedStateBackend
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> from barrierflow.core.state_descriptors import ValueStateDescriptor
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> total = ValueReducingState(backend.get_value_state(ValueStateDescriptor("sum")), max)
>>> backend.set_current_key("a")
>>> for value in [3, 9, 4]:
...     total.add(value)
>>> total.get()
9
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barrierflow.state.values import AggregatingState, ReducingState, ValueState


class ValueReducingState(ReducingState):
    """A `ReducingState` kept as the reduced value in `value_state`."""

    __slots__ = ("_reduce", "_value")

    def __init__(self, value_state: ValueState, reduce: Callable[[Any, Any], Any]) -> None:
        self._value = value_state
        self._reduce = reduce

    def get(self) -> Any:
        return self._value.value()

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ReducingState")
        current = self._value.value()
        self._value.update(value if current is None else self._reduce(current, value))

    def clear(self) -> None:
        self._value.clear()


class ValueAggregatingState(AggregatingState):
    """An `AggregatingState` kept as the accumulator in `value_state`."""

    __slots__ = ("_function", "_value")

    def __init__(self, value_state: ValueState, agg_function: Any) -> None:
        self._value = value_state
        self._function = agg_function

    def get(self) -> Any:
        accumulator = self._value.value()
        return None if accumulator is None else self._function.get_result(accumulator)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to an AggregatingState")
        accumulator = self._value.value()
        if accumulator is None:
            accumulator = self._function.create_accumulator()
        self._value.update(self._function.add(value, accumulator))

    def clear(self) -> None:
        self._value.clear()
