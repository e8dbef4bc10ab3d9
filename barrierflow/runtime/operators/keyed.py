"""Operators on keyed streams: state and timers are scoped to the key of the current record."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from barrierflow.core.functions import (
    Function,
    KeyedProcessFunction,
    TimeDomain,
    TimerService,
    as_callable,
)
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark
from barrierflow.runtime.operators.base import (
    OperatorContext,
    OperatorSnapshot,
    RestoredState,
    StreamOperator,
)
from barrierflow.runtime.operators.checkpointed import FunctionOperatorState
from barrierflow.runtime.operators.dead_letters import (
    emit_guarded,
    failed_index,
    send_dead_letters,
    without,
)
from barrierflow.runtime.operators.emitter import Emitter
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.runtime.timers import InternalTimerService, Timer
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backend import KeyedStateBackend
from barrierflow.state.backends import create_keyed_backend


class KeyedOperator(StreamOperator):
    """Owns the keyed state backend and the timer service of its key-group range.

    The backend is the job's (`OperatorContext.state_backend`, built by
    `create_keyed_backend`) and used through the `KeyedStateBackend` protocol only; it is
    disposed when the operator closes or aborts (subclasses that override `close` call
    `super().close()`). Both are snapshotted per key group in every checkpoint, so they
    rescale; a user
    function that is a `CheckpointedFunction` (`user_function()`) adds operator list
    state, redistributed as its lists say. A watermark first fires the event-time
    timers it passes, then goes on; processing-time timers fire when the task calls
    `on_processing_time` at `next_wakeup()`.
    Subclasses that use timers override `on_event_time` / `on_processing_time_timer`.
    """

    def __init__(self, uid: str, name: str, key_selector: Any) -> None:
        super().__init__(uid, name)
        self.key_selector = key_selector
        self._get_key = as_callable(key_selector, "get_key", "KeySelector")
        self.backend: KeyedStateBackend | None = None
        self.timer_service: InternalTimerService | None = None
        self._backend_disposed = False

    def initialize_state(self, restored: RestoredState | None) -> None:
        assert self.context is not None
        context = self.context
        self.backend = create_keyed_backend(
            context.state_backend,
            context.key_group_range,
            context.max_parallelism,
            operator_local_dir(context, self.uid),
            changelog=context.changelog_state_backend,
        )
        self.timer_service = InternalTimerService(
            context.key_group_range, context.max_parallelism, _Triggerable(self)
        )
        if context.changelog_state_backend:  # timers live on the heap with either backend
            self.timer_service.enable_changelog()
        if restored is not None:
            if restored.keyed:
                self.backend.restore(restored.keyed, restored.base)
            if restored.timers:
                self.timer_service.restore(restored.timers, restored.base)
        self._function_state = FunctionOperatorState(self.user_function())
        self._function_state.initialize(context, restored)

    def user_function(self) -> Any:
        """The user function that may keep operator list state (None: none)."""
        return None

    def runtime_context(self) -> TaskRuntimeContext:
        return TaskRuntimeContext(self.context, self.backend, self.metric_group)

    def process_watermark(self, watermark: Watermark) -> None:
        assert self.timer_service is not None
        self.timer_service.advance_watermark(watermark.timestamp)
        self.flush_timer_outputs()
        self.output.emit_watermark(watermark)

    def next_wakeup(self) -> int | None:
        assert self.timer_service is not None
        return self.timer_service.next_processing_time()

    def on_processing_time(self, now_ms: int) -> None:
        assert self.timer_service is not None
        self.timer_service.on_processing_time(now_ms)
        self.flush_timer_outputs()

    def on_event_time(self, timer: Timer) -> None:
        """An event-time timer fired (the current key is already the timer's)."""

    def on_processing_time_timer(self, timer: Timer) -> None:
        """A processing-time timer fired (the current key is already the timer's)."""

    def flush_timer_outputs(self) -> None:
        """Emit what the timers fired since the last call produced."""

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        assert self.backend is not None and self.timer_service is not None
        return OperatorSnapshot(
            keyed=self.backend.snapshot(checkpoint_id, savepoint),
            operator=self._function_state.snapshot(checkpoint_id),
            timers=self.timer_service.checkpoint(checkpoint_id),
        )

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self.backend is not None:
            self.backend.notify_checkpoint_complete(checkpoint_id)
        if self.timer_service is not None:
            self.timer_service.notify_checkpoint_complete(checkpoint_id)

    def close(self) -> None:
        self.dispose_backend()

    def abort(self) -> None:
        self.dispose_backend()

    def dispose_backend(self) -> None:
        """Free the keyed backend (close its store, delete its local folder), once."""
        if self.backend is not None and not self._backend_disposed:
            self._backend_disposed = True
            self.backend.dispose()


def operator_local_dir(context: OperatorContext, uid: str) -> Path | None:
    """The folder of one operator's on-disk state: below the subtask's local folder, named
    by its uid made safe for a file name (None: the subtask has none)."""
    if context.local_dir is None:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", uid)[:60]
    digest = hashlib.sha1(uid.encode()).hexdigest()[:8]
    return Path(context.local_dir) / f"{safe}-{digest}"


def batch_keys(backend: KeyedStateBackend, values: list[Any], get_key: Any) -> Iterable[Any]:
    """The keys of a batch's records, in order: computed lazily, record by record, unless
    the backend prefetches (`KeyedStateBackend.prefetch`); then all at once and handed to
    its prefetch first, so each record's state read finds its value in memory. The key
    selector runs once per record either way (a selector that raises fails the batch, as
    it does record by record: the guarded paths, which send such records to dead letters,
    do not prefetch)."""
    if not backend.prefetches:
        return map(get_key, values)
    keys = list(map(get_key, values))
    backend.prefetch(keys)
    return keys


class _Triggerable:
    """The timer service's callback: scopes state to the timer's key, then asks the operator."""

    __slots__ = ("_operator",)

    def __init__(self, operator: KeyedOperator) -> None:
        self._operator = operator

    def on_event_time(self, timer: Timer) -> None:
        operator = self._operator
        assert operator.backend is not None
        operator.backend.set_current_key(timer.key)
        operator.on_event_time(timer)

    def on_processing_time(self, timer: Timer) -> None:
        operator = self._operator
        assert operator.backend is not None
        operator.backend.set_current_key(timer.key)
        operator.on_processing_time_timer(timer)


class KeyedReduceOperator(KeyedOperator):
    """Emits the running reduction of each key after every record (Flink's keyed reduce).

    Each output keeps the timestamp of the record that produced it. With `final_only`
    (`RuntimeExecutionMode.BATCH`) it emits only each key's final reduction, once, when the
    end of input's watermark arrives, with the timestamp of the key's last record.
    """

    supports_dead_letters = True

    def __init__(
        self,
        uid: str,
        name: str,
        key_selector: Any,
        reduce_function: Any,
        *,
        dead_letters: bool = False,
        final_only: bool = False,
    ) -> None:
        super().__init__(uid, name, key_selector)
        self.reduce_function = reduce_function
        self._reduce = as_callable(reduce_function, "reduce", "ReduceFunction")
        self.dead_letters = dead_letters
        """Records the function raises on leave on `DEAD_LETTERS` (dead_letters.py)."""
        self.final_only = final_only
        self._pending: dict[Any, int] = {}
        """final_only: the keys reduced so far, each with its last record's timestamp."""

    def user_function(self) -> Any:
        return self.reduce_function

    def open(self) -> None:
        assert self.backend is not None
        self._accumulator = self.backend.get_value_state(ValueStateDescriptor("reduce"))
        if isinstance(self.reduce_function, Function):
            self.reduce_function.open(self.runtime_context())

    def process_batch(self, batch: RecordBatch) -> None:
        if self.dead_letters:
            self._reduce_guarded(batch)
            return
        if self.final_only:
            self._reduce_final(batch)
            return
        backend, state, get_key, reduce = (
            self.backend,
            self._accumulator,
            self._get_key,
            self._reduce,
        )
        assert backend is not None
        set_key, value_of, update = backend.set_current_key, state.value, state.update
        out = []
        append = out.append
        values = batch.values
        for value, key in zip(values, batch_keys(backend, values, get_key), strict=True):
            set_key(key)
            current = value_of()
            result = value if current is None else reduce(current, value)
            update(result)
            append(result)
        self.output.collect(RecordBatch(out, batch.timestamps))

    def _reduce_final(self, batch: RecordBatch) -> None:
        """`process_batch` of final_only: reduce, remember the key, emit nothing yet."""
        backend, state, get_key, reduce = (
            self.backend,
            self._accumulator,
            self._get_key,
            self._reduce,
        )
        assert backend is not None
        pending, values = self._pending, batch.values
        stamps = batch.timestamps or [NO_TIMESTAMP] * len(values)
        for value, key, stamp in zip(values, map(get_key, values), stamps, strict=True):
            backend.set_current_key(key)
            current = state.value()
            state.update(value if current is None else reduce(current, value))
            pending.pop(key, None)  # a key's place is its last record's
            pending[key] = stamp

    def process_watermark(self, watermark: Watermark) -> None:
        if self.final_only and watermark.timestamp == MAX_WATERMARK and self._pending:
            assert self.backend is not None
            values, stamps = [], []
            for key, stamp in self._pending.items():
                self.backend.set_current_key(key)
                values.append(self._accumulator.value())
                stamps.append(stamp)
            self._pending = {}
            timed = any(stamp != NO_TIMESTAMP for stamp in stamps)
            self.output.collect(RecordBatch(values, stamps if timed else None))
        super().process_watermark(watermark)

    def _reduce_guarded(self, batch: RecordBatch) -> None:
        """`process_batch`, a record the key selector or the function raises on going to
        `DEAD_LETTERS` (the key's reduction stays as it was)."""
        backend, state, get_key, reduce = (
            self.backend,
            self._accumulator,
            self._get_key,
            self._reduce,
        )
        assert backend is not None
        set_key, value_of, update = backend.set_current_key, state.value, state.update
        out: list[Any] = []
        append = out.append
        values = batch.values
        failed: list[tuple[int, BaseException]] = []
        records = iter(values)
        while True:
            try:
                for value in records:
                    set_key(get_key(value))
                    current = value_of()
                    result = value if current is None else reduce(current, value)
                    update(result)
                    append(result)
                break
            except Exception as error:
                failed.append((failed_index(len(values), records), error))
        if out and self.final_only:  # the kept records' keys wait for the end of input
            kept = without(batch.timestamps, failed) or [NO_TIMESTAMP] * len(out)
            good = without(values, failed)
            for value, stamp in zip(good, kept, strict=True):
                key = get_key(value)
                self._pending.pop(key, None)
                self._pending[key] = stamp
        elif out:
            self.output.collect(RecordBatch(out, without(batch.timestamps, failed)))
        if failed:
            send_dead_letters(self.output, self.name, "reduce", values, batch.timestamps,
                              failed)  # fmt: skip


class _KeyedTimerService(TimerService):
    """The user's view of the operator's timer service, scoped to the current key."""

    __slots__ = ("_operator",)

    def __init__(self, operator: KeyedProcessOperator) -> None:
        self._operator = operator

    def _service_and_key(self) -> tuple[InternalTimerService, Any]:
        operator = self._operator
        assert operator.timer_service is not None and operator.backend is not None
        return operator.timer_service, operator.backend.current_key

    def current_processing_time(self) -> int:
        context = self._operator.context
        assert context is not None
        return context.processing_time()

    def current_watermark(self) -> int:
        service = self._operator.timer_service
        assert service is not None
        return service.current_watermark

    def register_processing_time_timer(self, timestamp: int) -> None:
        service, key = self._service_and_key()
        service.register_processing_time_timer(key, None, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        service, key = self._service_and_key()
        service.register_event_time_timer(key, None, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        service, key = self._service_and_key()
        service.delete_processing_time_timer(key, None, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        service, key = self._service_and_key()
        service.delete_event_time_timer(key, None, timestamp)


class _ProcessContext(KeyedProcessFunction.OnTimerContext):
    """The ctx of `process_element` and of `on_timer` (which also has `time_domain`)."""

    def __init__(self, operator: KeyedProcessOperator) -> None:
        self._operator = operator
        self._timer_service = _KeyedTimerService(operator)
        self.current_timestamp: int | None = None
        self.output_timestamp: int | None = None
        self.domain = TimeDomain.EVENT_TIME

    def get_current_key(self) -> Any:
        backend = self._operator.backend
        assert backend is not None
        return backend.current_key

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def timer_service(self) -> TimerService:
        return self._timer_service

    def output(self, output_tag: Any, value: Any) -> None:
        self._operator.emitter.add_side(output_tag, value, self.output_timestamp)

    def time_domain(self) -> TimeDomain:
        return self.domain


class KeyedFunctionOperator(KeyedOperator):
    """Runs the process function of a keyed operator: per-record calls and its timers.

    Subclasses set `self.function` (with `on_timer`) and feed batches through
    `_process_keyed` with the key selector and the function's method of that input.
    """

    function: Any
    dead_letters: bool = False
    """Records the function raises on leave on `DEAD_LETTERS` (dead_letters.py)."""

    def user_function(self) -> Any:
        return self.function

    def open(self) -> None:
        self._ctx = _ProcessContext(self)
        self.emitter = Emitter(self.output)
        self.function.open(self.runtime_context())

    def _process_keyed(self, batch: RecordBatch, get_key: Any, process: Any) -> None:
        if self.dead_letters:
            self._process_keyed_guarded(batch, get_key, process)
            return
        backend, ctx, emitter = self.backend, self._ctx, self.emitter
        assert backend is not None
        ctx.domain = TimeDomain.EVENT_TIME
        timestamps = batch.timestamps
        values = batch.values
        keys = batch_keys(backend, values, get_key)
        if timestamps is None:
            ctx.current_timestamp = ctx.output_timestamp = None
            for value, key in zip(values, keys, strict=True):
                backend.set_current_key(key)
                produced = process(value, ctx)
                if produced is not None:
                    emitter.add_all(produced, None)
        else:
            for value, key, timestamp in zip(values, keys, timestamps, strict=True):
                backend.set_current_key(key)
                stamp = None if timestamp == NO_TIMESTAMP else timestamp
                ctx.current_timestamp = ctx.output_timestamp = stamp
                produced = process(value, ctx)
                if produced is not None:
                    emitter.add_all(produced, stamp)
        emitter.flush()

    def _process_keyed_guarded(self, batch: RecordBatch, get_key: Any, process: Any) -> None:
        """`_process_keyed`, a record the key selector or the function raises on going to
        `DEAD_LETTERS` (what it changed of its key's state or timers before it raised stays)."""
        backend, ctx, emitter = self.backend, self._ctx, self.emitter
        assert backend is not None
        ctx.domain = TimeDomain.EVENT_TIME

        def call(value: Any, stamp: int | None) -> None:
            backend.set_current_key(get_key(value))
            ctx.current_timestamp = ctx.output_timestamp = stamp
            produced = process(value, ctx)
            if produced is not None:
                emitter.add_all(produced, stamp)

        emit_guarded(self.output, self.name, batch, emitter, call)

    def on_event_time(self, timer: Timer) -> None:
        self._on_timer(timer, TimeDomain.EVENT_TIME, timer.timestamp)

    def on_processing_time_timer(self, timer: Timer) -> None:
        self._on_timer(timer, TimeDomain.PROCESSING_TIME, None)

    def _on_timer(self, timer: Timer, domain: TimeDomain, output_timestamp: int | None) -> None:
        ctx = self._ctx
        ctx.domain = domain
        ctx.current_timestamp = timer.timestamp
        ctx.output_timestamp = output_timestamp
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


class KeyedProcessOperator(KeyedFunctionOperator):
    """Runs a KeyedProcessFunction; its outputs are whatever it returns or yields."""

    supports_dead_letters = True

    def __init__(
        self, uid: str, name: str, key_selector: Any, function: Any, *, dead_letters: bool = False
    ) -> None:
        super().__init__(uid, name, key_selector)
        if not isinstance(function, KeyedProcessFunction):
            raise TypeError(f"process() needs a KeyedProcessFunction, got {function!r}")
        self.function = function
        self.dead_letters = dead_letters

    def process_batch(self, batch: RecordBatch) -> None:
        self._process_keyed(batch, self._get_key, self.function.process_element)
