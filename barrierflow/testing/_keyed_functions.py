"""Harnesses for map, flat_map and filter on a keyed stream (`KeyedStream.map` ...): the
function runs inside the KeyedProcessFunction a job wraps it in
(`runtime/operators/keyed_stateless.py`), so its `open` reaches keyed state."""

from __future__ import annotations

from typing import Any

from barrierflow.runtime.operators.keyed_stateless import KeyedFilter, KeyedFlatMap, KeyedMap
from barrierflow.testing._keyed import KeyedProcessFunctionHarness, built


class KeyedMapFunctionHarness(KeyedProcessFunctionHarness):
    """Drives a `MapFunction` (or callable) as `key_by(key_selector).map(function)` runs it,
    with the keyed state of each record's key.

    >>> from barrierflow.functions import MapFunction
    >>> from barrierflow.state import ValueStateDescriptor
    >>> class Running(MapFunction):
    ...     def open(self, runtime_context):
    ...         self.total = runtime_context.get_state(ValueStateDescriptor("total"))
    ...     def map(self, value):
    ...         self.total.update((self.total.value() or 0) + value[1])
    ...         return value[0], self.total.value()
    >>> harness = KeyedMapFunctionHarness(Running(), lambda r: r[0])
    >>> for record in [("a", 1), ("b", 5), ("a", 2)]:
    ...     harness.process_element(record)
    >>> harness.extract_output_values()
    [('a', 1), ('b', 5), ('a', 3)]
    """

    wrapper: type = KeyedMap

    def __init__(self, function: Any, key_selector: Any, **settings: Any) -> None:
        super().__init__(built(self.wrapper, function), key_selector, **settings)
        self.function = function  # errors name the user's function, not the wrapper


class KeyedFlatMapFunctionHarness(KeyedMapFunctionHarness):
    """Drives a `FlatMapFunction` as `key_by(key_selector).flat_map(function)` runs it."""

    wrapper = KeyedFlatMap


class KeyedFilterFunctionHarness(KeyedMapFunctionHarness):
    """Drives a `FilterFunction` as `key_by(key_selector).filter(function)` runs it."""

    wrapper = KeyedFilter
