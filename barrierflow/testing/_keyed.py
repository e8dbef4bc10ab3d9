"""Harnesses for keyed functions: `KeyedProcessFunction` and `KeyedCoProcessFunction`, over
the operators a job runs (`KeyedProcessOperator`, `KeyedCoProcessOperator`), with their keyed
state and timers open to inspection."""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import as_callable
from barrierflow.core.state_descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.operators.co_process import KeyedCoProcessOperator
from barrierflow.runtime.operators.keyed import KeyedOperator, KeyedProcessOperator
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.key_groups import assign_to_key_group, subtask_for_key_group
from barrierflow.testing._harness import OperatorHarness, TwoInputs

UID = "harness"
"""The uid of the operator under test (snapshots name no uid: one operator per harness)."""


def built(operator_class: type, *args: Any) -> Any:
    """`operator_class(*args)`, a function of the wrong kind refused as one line."""
    try:
        return operator_class(*args)
    except TypeError as error:
        raise ConfigurationError(str(error)) from error


class KeyedHarness(OperatorHarness):
    """What every keyed harness adds: the key check, keyed state and timers by key."""

    operator: KeyedOperator

    def check_key(self, key: Any) -> None:
        """Refuse a key of another subtask's key groups, naming the subtask it belongs to."""
        context = self.context
        group = assign_to_key_group(key, context.max_parallelism)
        if group not in context.key_group_range:
            owner = subtask_for_key_group(context.max_parallelism, context.parallelism, group)
            raise ConfigurationError(
                f"key {key!r:.200} is in key group {group}, which subtask {owner} of "
                f"{context.parallelism} owns; this harness is subtask {context.subtask_index} "
                f"(key groups {context.key_group_range.start}-{context.key_group_range.end})"
            )

    def _keyed_push(self, call: Any, get_key: Any, value: Any, timestamp: int | None,
                    what: str) -> None:  # fmt: skip
        self._check_open()
        key = self._guarded(f"the key selector on {value!r:.200}", lambda: get_key(value))
        self.check_key(key)
        self._push(call, value, timestamp, what)

    # ---- inspection ---------------------------------------------------------------------

    @property
    def current_watermark(self) -> int:
        """The operator's event time: the highest watermark it was given."""
        assert self.operator.timer_service is not None
        return self.operator.timer_service.current_watermark

    def get_state(self, key: Any, descriptor: StateDescriptor) -> Any:
        """The value of the state `descriptor` names for `key`, as the function sees it: a
        value state's value, a list state's list, a map state's dict, a reducing or
        aggregating state's result (None, [] or {} when the key has none)."""
        self._check_open()
        self.check_key(key)
        backend = self.operator.backend
        assert backend is not None
        handle = keyed_state_handle(backend, descriptor, self.context.processing_time)
        backend.set_current_key(key)
        if isinstance(descriptor, ValueStateDescriptor):
            return handle.value()
        if isinstance(descriptor, ListStateDescriptor):
            return list(handle.get() or [])
        if isinstance(descriptor, MapStateDescriptor):
            return dict(handle.items())
        if isinstance(descriptor, ReducingStateDescriptor | AggregatingStateDescriptor):
            return handle.get()
        raise ConfigurationError(f"get_state needs a state descriptor, got {descriptor!r:.200}")

    def keys(self, state_name: str) -> list[Any]:
        """The keys that have a value in state `state_name`."""
        self._check_open()
        assert self.operator.backend is not None
        return list(self.operator.backend.keys(state_name))

    def event_time_timers(self, key: Any) -> list[int]:
        """The timestamps of `key`'s event-time timers, in firing order."""
        self.check_key(key)
        assert self.operator.timer_service is not None
        return [t.timestamp for t in self.operator.timer_service.event_time_timers(key)]

    def processing_time_timers(self, key: Any) -> list[int]:
        """The timestamps of `key`'s processing-time timers, in firing order."""
        self.check_key(key)
        assert self.operator.timer_service is not None
        return [t.timestamp for t in self.operator.timer_service.processing_time_timers(key)]

    def num_event_time_timers(self) -> int:
        """Event-time timers registered, over all keys."""
        assert self.operator.timer_service is not None
        return self.operator.timer_service.num_event_time_timers()

    def num_processing_time_timers(self) -> int:
        """Processing-time timers registered, over all keys."""
        assert self.operator.timer_service is not None
        return self.operator.timer_service.num_processing_time_timers()


class KeyedProcessFunctionHarness(KeyedHarness):
    """Drives a `KeyedProcessFunction` as `key_by(key_selector).process(function)` runs it.

    >>> from barrierflow import OutputTag
    >>> from barrierflow.functions import KeyedProcessFunction
    >>> from barrierflow.state import ValueStateDescriptor
    >>> LATE = OutputTag("late")
    >>> class CountThenEmit(KeyedProcessFunction):
    ...     def open(self, runtime_context):
    ...         self.count = runtime_context.get_state(ValueStateDescriptor("count"))
    ...     def process_element(self, value, ctx):
    ...         if ctx.timestamp() <= ctx.timer_service().current_watermark():
    ...             yield LATE, value
    ...             return
    ...         self.count.update((self.count.value() or 0) + 1)
    ...         ctx.timer_service().register_event_time_timer(ctx.timestamp() // 10 * 10 + 9)
    ...     def on_timer(self, timestamp, ctx):
    ...         yield ctx.get_current_key(), self.count.value()
    ...         self.count.clear()
    >>> harness = KeyedProcessFunctionHarness(CountThenEmit(), lambda word: word)
    >>> harness.process_element("fox", 3)
    >>> harness.process_element("fox", 5)
    >>> harness.get_state("fox", ValueStateDescriptor("count")), harness.event_time_timers("fox")
    (2, [9])
    >>> harness.process_watermark(9)
    >>> harness.take_output()
    [('record', ('fox', 2), 9), ('watermark', 9)]
    >>> harness.process_element("fox", 7)
    >>> harness.get_side_output(LATE)
    ['fox']
    >>> harness.close()
    """

    def __init__(self, function: Any, key_selector: Any, **settings: Any) -> None:
        operator = built(KeyedProcessOperator, UID, type(function).__name__, key_selector, function)
        self._get_key = as_callable(key_selector, "get_key", "KeySelector")
        super().__init__(operator, function, **settings)

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record (with its event time in ms, or None) through `process_element`."""
        operator = self.operator
        self._keyed_push(operator.process_batch, self._get_key, value, timestamp, "the element")


class KeyedCoProcessFunctionHarness(TwoInputs, KeyedHarness):
    """Drives a `KeyedCoProcessFunction` as `a.connect(b).key_by(key1, key2).process(f)`
    runs it: both inputs share each key's state and timers; event time is the minimum of
    the two inputs' watermarks.

    >>> from barrierflow.functions import KeyedCoProcessFunction
    >>> class Pair(KeyedCoProcessFunction):
    ...     def open(self, runtime_context):
    ...         from barrierflow.state import ValueStateDescriptor
    ...         self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))
    ...     def process_element1(self, value, ctx):
    ...         self.seen.update(value)
    ...     def process_element2(self, value, ctx):
    ...         yield (self.seen.value(), value)
    >>> harness = KeyedCoProcessFunctionHarness(Pair(), lambda o: o[0], lambda p: p[0])
    >>> harness.process_element1(("order-1", 30), 1)
    >>> harness.process_element2(("order-1", "paid"), 2)
    >>> harness.extract_output_values()
    [(('order-1', 30), ('order-1', 'paid'))]
    >>> harness.process_watermark1(10); harness.get_watermarks()  # the other input holds it
    []
    >>> harness.process_watermark2(8); harness.get_watermarks()
    [8]
    """

    def __init__(
        self, function: Any, key_selector1: Any, key_selector2: Any, **settings: Any
    ) -> None:
        operator = built(
            KeyedCoProcessOperator,
            UID,
            type(function).__name__,
            key_selector1,
            key_selector2,
            function,
        )
        self._get_key1 = as_callable(key_selector1, "get_key", "KeySelector")
        self._get_key2 = as_callable(key_selector2, "get_key", "KeySelector")
        super().__init__(operator, function, **settings)

    def process_element1(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the first input through `process_element1`."""
        call = self.operator.process_batch1
        self._keyed_push(call, self._get_key1, value, timestamp, "the first input's element")

    def process_element2(self, value: Any, timestamp: int | None = None) -> None:
        """One record of the second input through `process_element2`."""
        call = self.operator.process_batch2
        self._keyed_push(call, self._get_key2, value, timestamp, "the second input's element")
