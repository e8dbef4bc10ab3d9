"""KeyedBatchOperator: runs a `KeyedBatchFunction` once per batch (`process_batches`).

The batch's keys are computed once: on a columnar batch keyed by a column
(`key_by("bidder")`) from the Arrow column, hashed vectorized (`state/key_group_arrays`),
else by the key selector per record. The key groups found are checked against the
subtask's range once and handed to the batched state handles (`state/batched.py`), which
reuse them when the function passes the batch's own key list. State and timers are the
`KeyedOperator`'s, so checkpoints, restores and rescaling are those of every keyed
operator; timers fire one by one with their key current, as in `KeyedProcessOperator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from barrierflow.core.batch_functions import KeyedBatchFunction
from barrierflow.core.column_key import ColumnKey
from barrierflow.core.functions import TimeDomain
from barrierflow.core.state_descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import AnyBatch, ColumnarBatch
from barrierflow.runtime.operators.emitter import Emitter
from barrierflow.runtime.operators.keyed import KeyedOperator
from barrierflow.runtime.operators.map_batches import TIMESTAMP_COLUMN
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.runtime.timers import Timer
from barrierflow.state.batched import (
    BatchListState,
    BatchMapState,
    BatchValueState,
    key_group_indices,
)
from barrierflow.state.key_group_arrays import key_groups_of_array
from barrierflow.state.ttl import records_processed

__all__ = ["KeyedBatchOperator"]


class BatchRuntimeContext(TaskRuntimeContext):
    """The runtime context of a `KeyedBatchFunction`: also batched state handles.

    `get_batch_state` offers value, list and map state, with or without TTL (reducing and
    aggregating state are refused with a ConfigurationError). The per-key handles of
    `get_state` & co. are the same states scoped to the current key: usable in `on_timer`
    (the timer's key is current); in `process_batch`, where no key is current, any use of
    them is a ConfigurationError rather than a read of whichever key was current last.
    """

    def __init__(self, operator: KeyedBatchOperator) -> None:
        super().__init__(operator.context, operator.backend, operator.metric_group)
        self._operator = operator
        self._batch_handles: dict[str, Any] = {}
        self._guards: dict[str, _OneKeyHandle] = {}

    def get_batch_state(self, descriptor: StateDescriptor) -> Any:
        """The state named by `descriptor` read and written many keys at a time (the same
        state `get_state` / `get_list_state` / `get_map_state` scope to one key):
        `BatchValueState`, `BatchListState` or `BatchMapState` (`state/batched.py`)."""
        kinds = (ValueStateDescriptor, ListStateDescriptor, MapStateDescriptor)
        if not isinstance(descriptor, kinds):
            what = (
                f"{type(descriptor).__name__} {descriptor.name!r}"
                if isinstance(descriptor, StateDescriptor)
                else repr(descriptor)[:200]
            )
            raise ConfigurationError(
                f"get_batch_state offers value, list and map state, not {what}: keep a "
                "running reduction in a batched value state (get_many, then put_many)"
            )
        expected = type(descriptor)
        inner = super()._handle(descriptor, expected)  # checks a name reused as another kind
        handle = self._batch_handles.get(descriptor.name)
        if handle is None:
            backend = self._keyed_backend()
            keys = self._operator.batch_keys
            if isinstance(descriptor, ValueStateDescriptor):
                handle = BatchValueState(inner, keys, backend.max_parallelism)
            elif isinstance(descriptor, ListStateDescriptor):
                handle = BatchListState(inner, backend, keys)
            else:
                handle = BatchMapState(inner, backend, keys)
            self._batch_handles[descriptor.name] = handle
        return handle

    def _handle(self, descriptor: Any, expected: type[StateDescriptor]) -> Any:
        inner = super()._handle(descriptor, expected)
        guard = self._guards.get(descriptor.name)
        if guard is None:
            guard = self._guards[descriptor.name] = _OneKeyHandle(
                inner, self._operator, descriptor.name
            )
        return guard


class _OneKeyHandle:
    """A per-key state handle given to a `KeyedBatchFunction` (BatchRuntimeContext)."""

    __slots__ = ("_inner", "_name", "_operator")

    def __init__(self, inner: Any, operator: KeyedBatchOperator, name: str) -> None:
        self._inner = inner
        self._operator = operator
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if self._operator.in_batch:
            raise ConfigurationError(
                f"state {self._name!r} was taken with get_state/get_list_state/get_map_state, "
                "which scope it to one key, but process_batch has no current key: use "
                "runtime_context.get_batch_state(descriptor) there (the per-key handle works "
                "in on_timer)"
            )
        return getattr(self._inner, attribute)


class _BatchContext(KeyedBatchFunction.Context, KeyedBatchFunction.OnTimerContext):
    """The ctx of `process_batch` and `on_timer`."""

    def __init__(self, operator: KeyedBatchOperator) -> None:
        self._operator = operator
        self.stamps: Sequence[int] | None = None
        self.domain = TimeDomain.EVENT_TIME

    def timestamps(self) -> Sequence[int] | None:
        return self.stamps

    def current_processing_time(self) -> int:
        context = self._operator.context
        assert context is not None
        return context.processing_time()

    def current_watermark(self) -> int:
        service = self._operator.timer_service
        assert service is not None
        return service.current_watermark

    def register_processing_time_timers(self, keys: Sequence[Any], timestamp: int) -> None:
        service = self._operator.timer_service
        assert service is not None
        register = service.register_processing_time_timer
        for key in keys:
            register(key, None, timestamp)

    def register_event_time_timers(self, keys: Sequence[Any], timestamp: int) -> None:
        service = self._operator.timer_service
        assert service is not None
        register = service.register_event_time_timer
        for key in keys:
            register(key, None, timestamp)

    def get_current_key(self) -> Any:
        backend = self._operator.backend
        assert backend is not None
        return backend.current_key

    def time_domain(self) -> TimeDomain:
        return self.domain


class KeyedBatchOperator(KeyedOperator):
    """Calls `function.process_batch(batch, keys, ctx)` per batch (module docstring)."""

    def __init__(self, uid: str, name: str, key_selector: Any, function: Any) -> None:
        if isinstance(key_selector, str):
            key_selector = ColumnKey(key_selector)
        super().__init__(uid, name, key_selector)
        if not isinstance(function, KeyedBatchFunction):
            raise TypeError(f"process_batches() needs a KeyedBatchFunction, got {function!r}")
        self.function = function
        self._keys: list[Any] | None = None
        self._key_groups: Any = None
        self.in_batch = False
        """Whether `process_batch` of the function runs (no key is current then)."""

    def user_function(self) -> Any:
        return self.function

    def open(self) -> None:
        self._ctx = _BatchContext(self)
        self.emitter = Emitter(self.output)
        self.function.open(BatchRuntimeContext(self))

    def batch_keys(self) -> tuple[list[Any] | None, Any]:
        """The keys of the batch being processed and their key groups (for the handles)."""
        return self._keys, self._key_groups

    def process_batch(self, batch: AnyBatch) -> None:
        if not len(batch):
            return
        data, keys, groups = self._keyed(batch)
        context = self.context
        assert context is not None
        # the key groups are checked once here, so a misrouted record fails before any state
        key_group_indices(keys, groups, context.key_group_range, context.max_parallelism)
        self._keys, self._key_groups = keys, groups
        ctx = self._ctx
        ctx.stamps = batch.timestamps
        ctx.domain = TimeDomain.EVENT_TIME
        self.in_batch = True
        try:
            produced = self.function.process_batch(data, keys, ctx)
        finally:
            self.in_batch = False
            self._keys = self._key_groups = None
        assert self.backend is not None
        records_processed(self.backend, len(keys))  # TTL sweeps run for every record
        self._emit(produced)

    def _keyed(self, batch: AnyBatch) -> tuple[Any, list[Any], Any]:
        """(what the function gets, the keys, their key groups or None)."""
        selector = self.key_selector
        if type(batch) is ColumnarBatch:
            data = batch.data
            if isinstance(selector, ColumnKey) and selector.name in data.schema.names:
                column = data.column(selector.name)
                assert self.context is not None
                groups = key_groups_of_array(column, self.context.max_parallelism)
                return data, column.to_pylist(), groups
            get_key = self._get_key
            return data, [get_key(value) for value in batch.values], None
        values = batch.values
        get_key = self._get_key
        return values, [get_key(value) for value in values], None

    def _emit(self, produced: Any, timestamp: int | None = None) -> None:
        if produced is None:
            return
        if isinstance(produced, pa.Table):
            for part in produced.combine_chunks().to_batches():
                self._emit(part)
            return
        if isinstance(produced, pa.RecordBatch):
            if not produced.num_rows:
                return
            index = produced.schema.get_field_index(TIMESTAMP_COLUMN)
            if index < 0:
                self.output.collect(ColumnarBatch(produced))
            else:
                stamps = produced.column(index)
                self.output.collect(ColumnarBatch(produced.remove_column(index), stamps))
            return
        out = list(produced)
        if out:
            stamps = None if timestamp is None else np.full(len(out), timestamp).tolist()
            self.output.collect(RecordBatch(out, stamps))

    def on_event_time(self, timer: Timer) -> None:
        self._on_timer(timer, TimeDomain.EVENT_TIME, timer.timestamp)

    def on_processing_time_timer(self, timer: Timer) -> None:
        self._on_timer(timer, TimeDomain.PROCESSING_TIME, None)

    def _on_timer(self, timer: Timer, domain: TimeDomain, output_timestamp: int | None) -> None:
        ctx = self._ctx
        ctx.domain = domain
        produced = self.function.on_timer(timer.timestamp, ctx)
        if produced is not None:
            self.emitter.add_all(produced, output_timestamp)

    def flush_timer_outputs(self) -> None:
        self.emitter.flush()

    def close(self) -> None:
        try:
            self.function.close()
        finally:
            super().close()
