"""map, filter and flat_map: one user function per record.

Every output keeps the timestamp of the record it came from (each of a flat_map's
outputs gets it), as in Flink. A function that is a `CheckpointedFunction` keeps
operator list state (`FunctionOperatorState`); any other is stateless. With
`dead_letters`, a record the function raises on leaves on the `DEAD_LETTERS` side output
(dead_letters.py) instead of failing the task.
"""

from __future__ import annotations

from itertools import compress
from operator import length_hint
from typing import Any

from barrierflow.core.functions import Function, as_callable
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.operators.checkpointed import FunctionOperatorState
from barrierflow.runtime.operators.dead_letters import failed_index, send_dead_letters, without
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

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        state = self._function_state.snapshot(checkpoint_id)
        return None if state is None else OperatorSnapshot(operator=state)

    def open(self) -> None:
        if isinstance(self.function, Function):
            self.function.open(TaskRuntimeContext(self.context, None, self.metric_group))

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()


class _DeadLettersOperator(_UserFunctionOperator):
    """A user function operator that can send the records its function raises on to the
    `DEAD_LETTERS` side output (`dead_letters`) instead of failing."""

    supports_dead_letters = True

    def __init__(self, uid: str, name: str, function: Any, *, dead_letters: bool = False) -> None:
        super().__init__(uid, name, function)
        self.dead_letters = dead_letters

    def process_batch(self, batch: RecordBatch) -> None:
        if self.dead_letters:
            self._process_guarded(batch)
        else:
            self._process(batch)

    def _process(self, batch: RecordBatch) -> None:
        raise NotImplementedError

    def _process_guarded(self, batch: RecordBatch) -> None:
        raise NotImplementedError

    def _send_dead_letters(
        self, batch: RecordBatch, failed: list[tuple[int, BaseException]]
    ) -> None:
        send_dead_letters(
            self.output, self.name, self.method, batch.values, batch.timestamps, failed
        )


class MapOperator(_DeadLettersOperator):
    method, kind = "map", "MapFunction"

    def _process(self, batch: RecordBatch) -> None:
        call = self._call
        self.output.collect(RecordBatch([call(value) for value in batch.values], batch.timestamps))

    def _process_guarded(self, batch: RecordBatch) -> None:
        call, values = self._call, batch.values
        out: list[Any] = []
        failed: list[tuple[int, BaseException]] = []
        records = iter(values)
        while True:
            try:
                # CPython's list.extend keeps what it appended before the iterator raised
                out.extend(map(call, records))
                break
            except Exception as error:
                failed.append((failed_index(len(values), records), error))
                if len(out) + len(failed) != len(values) - length_hint(records):
                    raise AssertionError("list.extend lost outputs at an error") from error
        if not failed:
            self.output.collect(RecordBatch(out, batch.timestamps))
            return
        if out:
            self.output.collect(RecordBatch(out, without(batch.timestamps, failed)))
        self._send_dead_letters(batch, failed)


class FilterOperator(_DeadLettersOperator):
    method, kind = "filter", "FilterFunction"

    def _process_guarded(self, batch: RecordBatch) -> None:
        call, values, timestamps = self._call, batch.values, batch.timestamps
        keep: list[Any] = []  # the function's answer per record (False: it raised)
        failed: list[tuple[int, BaseException]] = []
        records = iter(values)
        while True:
            try:
                keep.extend(map(call, records))  # keeps its answers before an error (CPython)
                break
            except Exception as error:
                index = failed_index(len(values), records)
                if len(keep) != index:
                    raise AssertionError("list.extend lost outputs at an error") from error
                keep.append(False)
                failed.append((index, error))
        kept = list(compress(values, keep))
        if kept:
            stamps = None if timestamps is None else list(compress(timestamps, keep))
            self.output.collect(RecordBatch(kept, stamps))
        if failed:
            self._send_dead_letters(batch, failed)

    def _process(self, batch: RecordBatch) -> None:
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


class FlatMapOperator(_DeadLettersOperator):
    method, kind = "flat_map", "FlatMapFunction"

    def _process_guarded(self, batch: RecordBatch) -> None:
        call, values, timestamps = self._call, batch.values, batch.timestamps
        out: list[Any] = []
        stamps: list[int] | None = None if timestamps is None else []
        failed: list[tuple[int, BaseException]] = []
        indexes = iter(range(len(values)))
        before = 0
        while True:
            try:
                for i in indexes:
                    before = len(out)
                    produced = call(values[i])
                    if produced is not None:
                        out.extend(produced)
                        if stamps is not None:
                            stamps.extend([timestamps[i]] * (len(out) - before))
                break
            except Exception as error:
                del out[before:]  # what a generator yielded before it raised
                failed.append((failed_index(len(values), indexes), error))
        if out:
            self.output.collect(RecordBatch(out, stamps))
        if failed:
            self._send_dead_letters(batch, failed)

    def _process(self, batch: RecordBatch) -> None:
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
