"""assign_timestamps_and_watermarks: event time assigned in the middle of a pipeline."""

from __future__ import annotations

from typing import Any

from barrierflow.core.watermark_strategy import (
    TimestampAssigner,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
)
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.columnar import AnyBatch, ColumnarBatch
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.operators.base import StreamOperator
from barrierflow.runtime.timestamp_columns import (
    column_timestamps,
    row_timestamps,
    summarizes_batches,
)
from barrierflow.runtime.watermarks import MIN_WATERMARK


class TimestampsAndWatermarksOperator(StreamOperator):
    """Gives every record the assigner's timestamp and generates this subtask's watermarks.

    Flink's TimestampsAndWatermarksOperator: one generator per subtask (there are no
    splits here), fed a batch's greatest timestamp once if it is a built-in one (exact),
    every record otherwise, and asked for a watermark every `auto_watermark_interval_ms`. Upstream
    watermarks and statuses are dropped, except `MAX_WATERMARK`, which is passed on
    (ACTIVE first if this output was idle) so the end of input still reaches
    downstream event time.
    """

    def __init__(self, uid: str, name: str, watermark_strategy: WatermarkStrategy) -> None:
        super().__init__(uid, name)
        self.watermark_strategy = watermark_strategy
        self._assigner: TimestampAssigner | None = None
        self._generator: WatermarkGenerator | None = None
        self._emitter = _WatermarkEmitter(self)
        self._next_periodic: int | None = None
        self._summarizes = True

    def open(self) -> None:
        context = self.context
        assert context is not None
        strategy = self.watermark_strategy
        self._assigner = strategy.create_timestamp_assigner()
        self._generator = strategy.create_watermark_generator(context.processing_time)
        self._summarizes = summarizes_batches(strategy)
        if not strategy.is_no_watermarks and context.auto_watermark_interval_ms > 0:
            self._next_periodic = context.processing_time() + context.auto_watermark_interval_ms

    def process_batch(self, batch: AnyBatch) -> None:
        assert self._assigner is not None and self._generator is not None
        column = self.watermark_strategy.timestamp_column
        if column is not None:
            self._process_column(batch, column)
            return
        extract, on_event, emitter = (
            self._assigner.extract_timestamp,
            self._generator.on_event,
            self._emitter,
        )
        values = batch.values
        old = batch.timestamps or [NO_TIMESTAMP] * len(values)
        timestamps = []
        append = timestamps.append
        if self._summarizes:
            for value, previous in zip(values, old, strict=True):
                append(extract(value, previous))
            if timestamps:
                on_event(None, max(timestamps), emitter)
        else:
            for value, previous in zip(values, old, strict=True):
                timestamp = extract(value, previous)
                append(timestamp)
                on_event(value, timestamp, emitter)
        if type(batch) is ColumnarBatch:
            self.output.collect(ColumnarBatch(batch.data, timestamps, batch.converter))
        else:
            self.output.collect(RecordBatch(values, timestamps))

    def _process_column(self, batch: AnyBatch, column: Any) -> None:
        """Timestamps from the strategy's column, a batch at a time."""
        assert self._generator is not None
        out: AnyBatch
        if type(batch) is ColumnarBatch:
            stamps = column_timestamps(batch.data, column)
            out = ColumnarBatch(batch.data, stamps, batch.converter)
            latest = int(stamps.max()) if len(stamps) else None
            timestamps: list[int] | None = None
        else:
            timestamps = row_timestamps(batch.values, column)
            out = RecordBatch(batch.values, timestamps)
            latest = max(timestamps) if timestamps else None
        if self._summarizes:
            if latest is not None:
                self._generator.on_event(None, latest, self._emitter)
        else:
            on_event, emitter = self._generator.on_event, self._emitter
            for value, timestamp in zip(out.values, out.timestamps or (), strict=True):
                on_event(value, timestamp, emitter)
        self.output.collect(out)

    def process_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp == MAX_WATERMARK and self._emitter.watermark != MAX_WATERMARK:
            self._emitter.mark_active()
            self._emitter.emit_watermark(watermark)

    def process_stream_status(self, status: StreamStatus) -> None:
        pass  # this operator's own generator decides its status

    def next_wakeup(self) -> int | None:
        return self._next_periodic

    def on_processing_time(self, now_ms: int) -> None:
        if self._next_periodic is not None and now_ms >= self._next_periodic:
            assert self._generator is not None and self.context is not None
            if self._emitter.watermark != MAX_WATERMARK:
                self._generator.on_periodic_emit(self._emitter)
            self._next_periodic = now_ms + self.context.auto_watermark_interval_ms


class _WatermarkEmitter(WatermarkOutput):
    """The generator's output: passes on growing watermarks and status changes."""

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator
        self.watermark = MIN_WATERMARK
        self.idle = False

    def emit_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp <= self.watermark:
            return
        self.watermark = watermark.timestamp
        self.mark_active()
        self._operator.output.emit_watermark(watermark)

    def mark_idle(self) -> None:
        if not self.idle:
            self.idle = True
            self._operator.output.emit_stream_status(StreamStatus.IDLE)

    def mark_active(self) -> None:
        if self.idle:
            self.idle = False
            self._operator.output.emit_stream_status(StreamStatus.ACTIVE)
