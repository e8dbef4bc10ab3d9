"""Broadcast-state operators: `CoBroadcastProcessOperator` (a non-keyed stream connected with
a broadcast stream) and `KeyedBroadcastProcessOperator` (a keyed one), Flink's
CoBroadcastWithNonKeyedOperator and CoBroadcastWithKeyedOperator.

Mailbox thread only. Input 1 is the non-broadcast stream, input 2 the broadcast stream
(broadcast partitioning: every subtask gets every element). Each subtask keeps its own
copy of the broadcast states (`state/broadcast_state.py`), writable only in
`process_broadcast_element`, and snapshots it as its operator state next to the user
function's operator list state:

    {"broadcast": <BroadcastStateStore snapshot>, "function": <list state snapshot> | None}

At a restore, new subtask i takes old subtask i mod (old parallelism)'s copy (Flink's
round robin); the keyed operator's keyed state and timers follow their key groups as
in every keyed operator. Outputs carry the timestamp of the element (or event-time
timer) that produced them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from barrierflow.core.broadcast_functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from barrierflow.core.functions import TimeDomain
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.operators.base import (
    OperatorSnapshot,
    RestoredState,
    TwoInputStreamOperator,
)
from barrierflow.runtime.operators.checkpointed import FunctionOperatorState
from barrierflow.runtime.operators.emitter import Emitter
from barrierflow.runtime.operators.keyed import KeyedFunctionOperator, _ProcessContext
from barrierflow.runtime.operators.process import FunctionOperator
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.state.broadcast_state import BroadcastStateStore
from barrierflow.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)

__all__ = [
    "CoBroadcastProcessOperator",
    "KeyedBroadcastProcessOperator",
    "broadcast_operator_state",
    "split_broadcast_operator_state",
]


def split_broadcast_operator_state(state: Any) -> tuple[Any, Any] | None:
    """(broadcast snapshot, the function's operator list state or None) of one subtask's
    operator state, if a broadcast operator wrote it (the module's format); else None."""
    if not isinstance(state, dict) or "broadcast" not in state:
        return None
    return state["broadcast"], state.get("function")


def broadcast_operator_state(broadcast: Any, function_state: Any) -> dict[str, Any]:
    """One subtask's operator state of a broadcast operator (the module's format)."""
    return {"broadcast": broadcast, "function": function_state}


def _split_restored(
    restored: RestoredState | None,
) -> tuple[list[tuple[int, Any]], RestoredState | None]:
    """The old subtasks' broadcast snapshots, and `restored` with only the function's
    operator list state left as its operator state."""
    if restored is None:
        return [], None
    broadcast, function = [], []
    for old, state in restored.operator:
        parts = split_broadcast_operator_state(state)
        if parts is None:
            raise ConfigurationError(
                f"old subtask {old}'s state of this operator is no broadcast operator's "
                f"state ({state!r:.120}): was the uid given to another operator?"
            )
        broadcast.append((old, parts[0]))
        if parts[1] is not None:
            function.append((old, parts[1]))
    return broadcast, replace(restored, operator=function)


def _combined(store: BroadcastStateStore, function_state: Any) -> dict[str, Any]:
    return broadcast_operator_state(store.snapshot(), function_state)


def _stamp(timestamps: Sequence[int] | None, index: int) -> int | None:
    if timestamps is None:
        return None
    timestamp = timestamps[index]
    return None if timestamp == NO_TIMESTAMP else timestamp


def _checked_descriptors(descriptors: Sequence[Any]) -> list[MapStateDescriptor]:
    if not descriptors:
        raise ConfigurationError("a broadcast operator needs at least one MapStateDescriptor")
    for descriptor in descriptors:
        if not isinstance(descriptor, MapStateDescriptor):
            raise ConfigurationError(
                f"broadcast state is described by a MapStateDescriptor, got {descriptor!r:.200}"
            )
    return list(descriptors)


class _BroadcastSide:
    """What both operators do with the broadcast input: call `process_broadcast_element`
    with a writable context, element by element, and emit what it returns."""

    emitter: Emitter
    broadcast_states: BroadcastStateStore

    def _process_broadcast(self, batch: RecordBatch, ctx: Any, process: Callable) -> None:
        emitter, timestamps = self.emitter, batch.timestamps
        for index, value in enumerate(batch.values):
            stamp = _stamp(timestamps, index)
            ctx.current_timestamp = stamp
            produced = process(value, ctx)
            if produced is not None:
                emitter.add_all(produced, stamp)
        emitter.flush()


class _ElementContext:
    """What the contexts these operators build themselves share: the current element's
    timestamp (set by `_process_broadcast`), the task's clock and side outputs."""

    def __init__(self, operator: CoBroadcastProcessOperator | KeyedBroadcastProcessOperator):
        self._operator = operator
        self.current_timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def current_processing_time(self) -> int:
        assert self._operator.context is not None
        return self._operator.context.processing_time()

    def output(self, output_tag: Any, value: Any) -> None:
        self._operator.emitter.add_side(output_tag, value, self.current_timestamp)


class _NonKeyedContext(
    _ElementContext, BroadcastProcessFunction.Context, BroadcastProcessFunction.ReadOnlyContext
):
    """Both contexts of a BroadcastProcessFunction; `writable` picks the side."""

    _operator: CoBroadcastProcessOperator

    def __init__(self, operator: CoBroadcastProcessOperator, writable: bool) -> None:
        super().__init__(operator)
        self._writable = writable

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        store = self._operator.broadcast_states
        if self._writable:
            return store.broadcast_state(state_descriptor)
        return store.read_only_state(state_descriptor)


class CoBroadcastProcessOperator(_BroadcastSide, FunctionOperator, TwoInputStreamOperator):
    """Runs a BroadcastProcessFunction: input 1 the non-keyed stream, input 2 the broadcast
    stream; clocks and side outputs, no timers (as in Flink)."""

    def __init__(
        self, uid: str, name: str, function: Any, descriptors: Sequence[MapStateDescriptor]
    ) -> None:
        super().__init__(uid, name)
        if not isinstance(function, BroadcastProcessFunction):
            raise TypeError(f"process() needs a BroadcastProcessFunction, got {function!r}")
        self.function = function
        self.descriptors = _checked_descriptors(descriptors)

    def initialize_state(self, restored: RestoredState | None) -> None:
        assert self.context is not None
        broadcast, rest = _split_restored(restored)
        self.broadcast_states = BroadcastStateStore.restored(
            self.descriptors, broadcast, self.context.subtask_index
        )
        self._function_state = FunctionOperatorState(self.function)
        self._function_state.initialize(self.context, rest)

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        function_state = self._function_state.snapshot(checkpoint_id)
        return OperatorSnapshot(operator=_combined(self.broadcast_states, function_state))

    def open(self) -> None:
        super().open()
        self._ctx = self._read_only_ctx = _NonKeyedContext(self, writable=False)
        self._broadcast_ctx = _NonKeyedContext(self, writable=True)

    def process_batch1(self, batch: RecordBatch) -> None:
        self._process_with(batch, self.function.process_element)

    def process_batch2(self, batch: RecordBatch) -> None:
        self._process_broadcast(batch, self._broadcast_ctx, self.function.process_broadcast_element)


class _KeyedReadOnlyContext(_ProcessContext, KeyedBroadcastProcessFunction.OnTimerContext):
    """The keyed side's context (process_element, on_timer): key, timers, side outputs
    (from `_ProcessContext`) and the broadcast state read-only."""

    _operator: KeyedBroadcastProcessOperator

    def current_processing_time(self) -> int:
        return self._timer_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._timer_service.current_watermark()

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        return self._operator.broadcast_states.read_only_state(state_descriptor)


class _KeyedBroadcastContext(_ElementContext, KeyedBroadcastProcessFunction.Context):
    """The broadcast side's context of a KeyedBroadcastProcessFunction: writable broadcast
    state and `apply_to_keyed_state` over every key of the subtask."""

    _operator: KeyedBroadcastProcessOperator

    def current_watermark(self) -> int:
        assert self._operator.timer_service is not None
        return self._operator.timer_service.current_watermark

    def get_broadcast_state(self, state_descriptor: Any) -> Any:
        return self._operator.broadcast_states.broadcast_state(state_descriptor)

    def apply_to_keyed_state(
        self, state_descriptor: Any, function: Callable[[Any, Any], None]
    ) -> None:
        operator = self._operator
        backend = operator.backend
        assert backend is not None
        state = operator.keyed_runtime_context.state_for(state_descriptor)
        previous = backend.current_key
        for key in list(backend.keys(state_descriptor.name)):
            backend.set_current_key(key)
            function(key, state)
        if previous is not None:
            backend.set_current_key(previous)


class _KeyedRuntimeContext(TaskRuntimeContext):
    """The runtime context the function opens with; `state_for` hands out the same handle
    `get_state` & co. give for a descriptor, whatever its kind."""

    def state_for(self, descriptor: Any) -> Any:
        for kind, getter in (
            (ValueStateDescriptor, self.get_state),
            (ListStateDescriptor, self.get_list_state),
            (MapStateDescriptor, self.get_map_state),
            (ReducingStateDescriptor, self.get_reducing_state),
            (AggregatingStateDescriptor, self.get_aggregating_state),
        ):
            if isinstance(descriptor, kind):
                return getter(descriptor)
        raise ConfigurationError(
            f"apply_to_keyed_state needs a keyed state descriptor, got {descriptor!r:.200}"
        )


class KeyedBroadcastProcessOperator(_BroadcastSide, KeyedFunctionOperator, TwoInputStreamOperator):
    """Runs a KeyedBroadcastProcessFunction: input 1 the keyed stream (keyed state and
    timers of each element's key), input 2 the broadcast stream."""

    def __init__(
        self,
        uid: str,
        name: str,
        key_selector: Any,
        function: Any,
        descriptors: Sequence[MapStateDescriptor],
    ) -> None:
        super().__init__(uid, name, key_selector)
        if not isinstance(function, KeyedBroadcastProcessFunction):
            raise TypeError(f"process() needs a KeyedBroadcastProcessFunction, got {function!r}")
        self.function = function
        self.descriptors = _checked_descriptors(descriptors)

    def initialize_state(self, restored: RestoredState | None) -> None:
        assert self.context is not None
        broadcast, rest = _split_restored(restored)
        self.broadcast_states = BroadcastStateStore.restored(
            self.descriptors, broadcast, self.context.subtask_index
        )
        super().initialize_state(rest)

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        snapshot = super().snapshot_state(checkpoint_id, savepoint)
        assert snapshot is not None
        return replace(snapshot, operator=_combined(self.broadcast_states, snapshot.operator))

    def runtime_context(self) -> TaskRuntimeContext:
        return _KeyedRuntimeContext(self.context, self.backend, self.metric_group)

    def open(self) -> None:
        self._ctx = _KeyedReadOnlyContext(self)
        self._broadcast_ctx = _KeyedBroadcastContext(self)
        self.emitter = Emitter(self.output)
        self.keyed_runtime_context = self.runtime_context()
        self.function.open(self.keyed_runtime_context)

    def process_batch1(self, batch: RecordBatch) -> None:
        self._process_keyed(batch, self._get_key, self.function.process_element)

    def process_batch2(self, batch: RecordBatch) -> None:
        self._ctx.domain = TimeDomain.EVENT_TIME
        self._process_broadcast(batch, self._broadcast_ctx, self.function.process_broadcast_element)
