"""IntervalJoinOperator: `IntervalJoinLogic` (runtime/joins) as a keyed two-input operator.

Mailbox thread only. The logic keeps its buffers in memory, whatever state backend the
job chose; at a checkpoint they are written, key by key, into a fresh heap keyed backend
(`create_keyed_backend(HashMapStateBackend())`: the buffers are Python objects already,
so the backend here is only the codec of the canonical per-key-group section, with no
store to open on disk per checkpoint) whose snapshot is cut per key group and written on
the uploader thread, so a restore at another parallelism takes exactly its own keys (the
logic rebuilds the cleanup timers). Late records go to the late-data side outputs when
tags are set, else they are dropped. Results carry max(left, right) timestamp.
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import Function, as_callable
from barrierflow.core.state_backends import HashMapStateBackend
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.joins import IntervalJoinLogic, JoinedRecord, JoinSide
from barrierflow.runtime.operators.base import (
    OperatorSnapshot,
    RestoredState,
    TwoInputStreamOperator,
)
from barrierflow.runtime.operators.runtime_context import TaskRuntimeContext
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backend import KeyedStateBackend
from barrierflow.state.backends import create_keyed_backend

__all__ = ["IntervalJoinOperator"]

BUFFERS_STATE = "interval-join-buffers"
"""The keyed state (one value per key) an interval join's checkpoint keeps its buffers in."""


class IntervalJoinOperator(TwoInputStreamOperator):
    """Joins two keyed inputs on `left + lower <= right <= left + upper` (Flink's
    IntervalJoinOperator); `spec` is an `IntervalJoinSpec`."""

    def __init__(
        self, uid: str, name: str, key_selector1: Any, key_selector2: Any, spec: Any
    ) -> None:
        super().__init__(uid, name)
        self.key_selector1 = key_selector1
        self.key_selector2 = key_selector2
        self.spec = spec
        self._get_key1 = as_callable(key_selector1, "get_key", "KeySelector")
        self._get_key2 = as_callable(key_selector2, "get_key", "KeySelector")
        self.logic: IntervalJoinLogic | None = None
        self.num_late_records_dropped = 0

    def _new_backend(self) -> KeyedStateBackend:
        """A fresh in-memory backend of this subtask's key groups (see the module docstring)."""
        assert self.context is not None
        context = self.context
        return create_keyed_backend(
            HashMapStateBackend(), context.key_group_range, context.max_parallelism
        )

    def initialize_state(self, restored: RestoredState | None) -> None:
        self.logic = self.spec.create_logic()
        if restored is not None and restored.keyed:
            backend = self._new_backend()
            try:
                backend.restore(restored.keyed, restored.base)
                state = backend.get_value_state(ValueStateDescriptor(BUFFERS_STATE))
                buffers = {}
                for key in backend.keys(BUFFERS_STATE):
                    backend.set_current_key(key)
                    buffers[key] = state.value()
            finally:
                backend.dispose()
            self.logic.restore(buffers)

    def open(self) -> None:
        function = self.spec.process_join_function
        if isinstance(function, Function):
            function.open(TaskRuntimeContext(self.context, None, self.metric_group))
        self._late_tags = {
            JoinSide.LEFT: self.spec.left_late_data_output_tag,
            JoinSide.RIGHT: self.spec.right_late_data_output_tag,
        }

    def process_batch1(self, batch: RecordBatch) -> None:
        assert self.logic is not None
        self._process(batch, self._get_key1, self.logic.process_left)

    def process_batch2(self, batch: RecordBatch) -> None:
        assert self.logic is not None
        self._process(batch, self._get_key2, self.logic.process_right)

    def _process(self, batch: RecordBatch, get_key: Any, process: Any) -> None:
        values: list[Any] = []
        stamps: list[int] = []
        late: dict[str, tuple[list[Any], list[int]]] = {}
        timestamps = batch.timestamps or [NO_TIMESTAMP] * len(batch.values)
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            stamp = None if timestamp == NO_TIMESTAMP else timestamp
            for item in process(get_key(value), value, stamp):
                if type(item) is JoinedRecord:
                    values.append(item.value)
                    stamps.append(item.timestamp)
                    continue
                tag = self._late_tags[item.side]
                if tag is None:
                    self.num_late_records_dropped += 1
                    continue
                into = late.setdefault(tag.tag_id, ([], []))
                into[0].append(item.value)
                into[1].append(item.timestamp)
        if values:
            self.output.collect(RecordBatch(values, stamps))
        for tag_id, (late_values, late_stamps) in late.items():
            self.output.collect_side(tag_id, RecordBatch(late_values, late_stamps))

    def process_watermark(self, watermark: Watermark) -> None:
        assert self.logic is not None
        self.logic.on_watermark(watermark.timestamp)
        self.output.emit_watermark(watermark)

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        assert self.logic is not None
        backend = self._new_backend()
        state = backend.get_value_state(ValueStateDescriptor(BUFFERS_STATE))
        for key, buffers in self.logic.snapshot().items():
            backend.set_current_key(key)
            state.update(buffers)
        return OperatorSnapshot(keyed=backend.snapshot())

    def close(self) -> None:
        function = self.spec.process_join_function
        if isinstance(function, Function):
            function.close()
