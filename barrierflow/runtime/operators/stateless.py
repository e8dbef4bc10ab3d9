"""map, filter and flat_map: one user function per record.

Every output keeps the timestamp of the record it came from (each of a flat_map's
outputs gets it), as in Flink. A function that is a `CheckpointedFunction` keeps
operator list state (`FunctionOperatorState`); any other is stateless.
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import Function, as_callable
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.operators.checkpointed import FunctionOperatorState
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext


class _UserFunctionOperator(StreamOperator):
    method = ""
    kind = ""

    def __init__(self, uid: str, name: str, function: Any) -> None:
        super().__init__(uid, name)
        self.function = function
        self._call = as_callable(function, self.method, self.kind)
        self._function_state = FunctionOperatorState(function)

    def initialize_state(self, restored: RestoredState | None) -> None:
        self._function_state.initialize(self.context, restored)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        state = self._function_state.snapshot(checkpoint_id)
        return None if state is None else OperatorSnapshot(operator=state)

    def open(self) -> None:
        if isinstance(self.function, Function):
            self.function.open(TaskRuntimeContext(self.context, None, self.metric_group))

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()


class MapOperator(_UserFunctionOperator):
    method, kind = "map", "MapFunction"

    def process_batch(self, batch: RecordBatch) -> None:
        call = self._call
        self.output.collect(RecordBatch([call(value) for value in batch.values], batch.timestamps))


class FilterOperator(_UserFunctionOperator):
    method, kind = "filter", "FilterFunction"

    def process_batch(self, batch: RecordBatch) -> None:
        call = self._call
        timestamps = batch.timestamps
        if timestamps is None:
            kept = [value for value in batch.values if call(value)]
            if kept:
                self.output.collect(RecordBatch(kept))
            return
        values: list[Any] = []
        stamps: list[int] = []
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            if call(value):
                values.append(value)
                stamps.append(timestamp)
        if values:
            self.output.collect(RecordBatch(values, stamps))


class FlatMapOperator(_UserFunctionOperator):
    method, kind = "flat_map", "FlatMapFunction"

    def process_batch(self, batch: RecordBatch) -> None:
        call = self._call
        out: list[Any] = []
        timestamps = batch.timestamps
        if timestamps is None:
            extend = out.extend
            for value in batch.values:
                produced = call(value)
                if produced is not None:
                    extend(produced)
            if out:
                self.output.collect(RecordBatch(out))
            return
        stamps: list[int] = []
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            produced = call(value)
            if produced is not None:
                before = len(out)
                out.extend(produced)
                stamps.extend([timestamp] * (len(out) - before))
        if out:
            self.output.collect(RecordBatch(out, stamps))
