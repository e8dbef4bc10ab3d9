"""ProcessOperator: a ProcessFunction on a non-keyed stream (timestamps, side outputs, clocks)."""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import ProcessFunction, TimerService
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.operators.checkpointed import FunctionOperatorState
from barrierflow.runtime.operators.dead_letters import emit_guarded
from barrierflow.runtime.operators.emitter import Emitter
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.runtime.watermarks import MIN_WATERMARK


class _ClocksOnly(TimerService):
    """Clocks without timers: Flink allows timers on keyed streams only."""

    def __init__(self, operator: FunctionOperator) -> None:
        self._operator = operator

    def current_processing_time(self) -> int:
        assert self._operator.context is not None
        return self._operator.context.processing_time()

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def _no_timers(self, timestamp: int) -> None:
        raise ConfigurationError(
            "timers need a keyed stream: key_by() first and use a KeyedProcessFunction"
        )

    register_processing_time_timer = register_event_time_timer = _no_timers
    delete_processing_time_timer = delete_event_time_timer = _no_timers


class _Context(ProcessFunction.Context):
    def __init__(self, operator: FunctionOperator) -> None:
        self._operator = operator
        self._timer_service = _ClocksOnly(operator)
        self.current_timestamp: int | None = None

    def timestamp(self) -> int | None:
        return self.current_timestamp

    def timer_service(self) -> TimerService:
        return self._timer_service

    def output(self, output_tag: Any, value: Any) -> None:
        self._operator.emitter.add_side(output_tag, value, self.current_timestamp)


class FunctionOperator(StreamOperator):
    """Runs a non-keyed process function: clocks and side outputs, no timers.

    Subclasses set `self.function` and feed batches through `_process_with` with the
    function's method of that input; outputs keep their input record's timestamp. A
    `CheckpointedFunction` keeps operator list state.
    """

    function: Any
    current_watermark: int = MIN_WATERMARK
    dead_letters: bool = False
    """Records the function raises on leave on `DEAD_LETTERS` (dead_letters.py)."""

    def initialize_state(self, restored: RestoredState | None) -> None:
        self._function_state = FunctionOperatorState(self.function)
        self._function_state.initialize(self.context, restored)

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        state = self._function_state.snapshot(checkpoint_id)
        return None if state is None else OperatorSnapshot(operator=state)

    def open(self) -> None:
        self._ctx = _Context(self)
        self.emitter = Emitter(self.output)
        self.function.open(TaskRuntimeContext(self.context, None, self.metric_group))

    def _process_with(self, batch: RecordBatch, process: Any) -> None:
        if self.dead_letters:
            self._process_guarded(batch, process)
            return
        ctx, emitter = self._ctx, self.emitter
        timestamps = batch.timestamps or [NO_TIMESTAMP] * len(batch.values)
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            stamp = None if timestamp == NO_TIMESTAMP else timestamp
            ctx.current_timestamp = stamp
            produced = process(value, ctx)
            if produced is not None:
                emitter.add_all(produced, stamp)
        emitter.flush()

    def _process_guarded(self, batch: RecordBatch, process: Any) -> None:
        """`_process_with`, a record the function raises on going to `DEAD_LETTERS`."""
        ctx, emitter = self._ctx, self.emitter

        def call(value: Any, stamp: int | None) -> None:
            ctx.current_timestamp = stamp
            produced = process(value, ctx)
            if produced is not None:
                emitter.add_all(produced, stamp)

        emit_guarded(self.output, self.name, batch, emitter, call)

    def process_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        self.output.emit_watermark(watermark)

    def close(self) -> None:
        self.function.close()


class ProcessOperator(FunctionOperator):
    """Runs a ProcessFunction; outputs keep the timestamp of their input record."""

    supports_dead_letters = True

    def __init__(self, uid: str, name: str, function: Any, *, dead_letters: bool = False) -> None:
        super().__init__(uid, name)
        if not isinstance(function, ProcessFunction):
            raise TypeError(f"process() needs a ProcessFunction, got {function!r}")
        self.function = function
        self.dead_letters = dead_letters

    def process_batch(self, batch: RecordBatch) -> None:
        self._process_with(batch, self.function.process_element)
