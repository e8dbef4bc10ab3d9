"""assign_timestamps_and_watermarks: event time assigned in the middle of a pipeline."""

from __future__ import annotations

from barrierflow.core.watermark_strategy import (
    TimestampAssigner,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
)
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.operators.base import StreamOperator
from barrierflow.runtime.watermarks import MIN_WATERMARK


class TimestampsAndWatermarksOperator(StreamOperator):
    """Gives every record the assigner's timestamp and generates this subtask's watermarks.

    Flink's TimestampsAndWatermarksOperator: one generator per subtask (there are no
    splits here), asked for a watermark every `auto_watermark_interval_ms`. Upstream
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

    def open(self) -> None:
        context = self.context
        assert context is not None
        strategy = self.watermark_strategy
        self._assigner = strategy.create_timestamp_assigner()
        self._generator = strategy.create_watermark_generator(context.processing_time)
        if not strategy.is_no_watermarks and context.auto_watermark_interval_ms > 0:
            self._next_periodic = context.processing_time() + context.auto_watermark_interval_ms

    def process_batch(self, batch: RecordBatch) -> None:
        assert self._assigner is not None and self._generator is not None
        extract, on_event, emitter = (
            self._assigner.extract_timestamp,
            self._generator.on_event,
            self._emitter,
        )
        values = batch.values
        old = batch.timestamps or [NO_TIMESTAMP] * len(values)
        timestamps = []
        append = timestamps.append
        for value, previous in zip(values, old, strict=True):
            timestamp = extract(value, previous)
            append(timestamp)
            on_event(value, timestamp, emitter)
        self.output.collect(RecordBatch(values, timestamps))

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
