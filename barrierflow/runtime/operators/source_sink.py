"""The ends of a chain: a source operator that owns a SourceReader and a sink
operator that drives a two-phase-commit SinkWriter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from barrierflow.connectors.base import (
    DEAD_LETTERS,
    BadRecord,
    DeadLetter,
    Sink,
    SinkContext,
    SinkWriter,
    Source,
    SourceReader,
    SourceSplit,
    SplitBatch,
)
from barrierflow.core.watermark_strategy import TimestampAssigner, WatermarkStrategy
from barrierflow.errors import SourceError
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.columnar import AnyBatch, ColumnarBatch, arrow_rows
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.operators.base import OperatorSnapshot, RestoredState, StreamOperator
from barrierflow.runtime.timestamp_columns import (
    column_timestamps,
    row_timestamps,
    summarizes_batches,
)
from barrierflow.runtime.watermark_outputs import SplitWatermarkMultiplexer
from barrierflow.runtime.watermarks import MIN_WATERMARK


class SourceOperator(StreamOperator):
    """Reads this subtask's splits; its operator state is the position of every split.

    On restore it takes the union of all old subtasks' positions, so splits may move
    between subtasks when the parallelism changes.

    A reader may return a `pyarrow.RecordBatch` as a SplitBatch's records (with a row
    converter, default `to_pylist()` dicts): it leaves as a `ColumnarBatch`.

    Event time (Flink's SourceOperator with its watermark strategy): each record gets
    the strategy's timestamp column (`with_timestamp_column`, a batch at a time;
    `runtime/timestamp_columns.py`) or the assigner's timestamp (given the reader's own
    timestamp, if any, else `NO_TIMESTAMP`); a built-in generator is fed each batch's
    greatest timestamp once (exact: it keeps only the greatest), a custom one every
    record; each split the reader reports gets its own watermark generator,
    combined by a `SplitWatermarkMultiplexer` and asked for a watermark every
    `auto_watermark_interval_ms` of processing time (`next_wakeup`). A subtask
    without splits goes IDLE at once. When the input ends, the operator emits
    `MAX_WATERMARK` (ACTIVE first if it was idle), whatever the strategy, so every
    downstream event-time timer fires before the final checkpoint. Watermarks are
    not checkpointed: after a restore every split starts again from the minimum.

    Records the reader could not decode (`SplitBatch.bad`) fail the task with a
    `SourceError` naming the source, split and offset, or, when the source has
    `dead_letters` set, leave as `DeadLetter` values on the `DEAD_LETTERS` side output
    (after the batch's good records; their offsets are consumed either way).
    """

    MORE_AVAILABLE = 1
    """`emit_next` emitted records or finished a split: call it again at once."""
    NOTHING_AVAILABLE = 2
    """The reader has nothing right now: wait a moment before calling again."""
    END_OF_INPUT = 3
    """All input has ended (and `MAX_WATERMARK` went out)."""

    def __init__(
        self,
        uid: str,
        name: str,
        source: Source,
        watermark_strategy: WatermarkStrategy | None = None,
    ) -> None:
        super().__init__(uid, name)
        self.source = source
        self.watermark_strategy = watermark_strategy or WatermarkStrategy.no_watermarks()
        self.splits: Sequence[SourceSplit] = ()
        self.reader: SourceReader | None = None
        self._assigner: TimestampAssigner | None = None
        self._summarizes = True
        self._watermarks: SplitWatermarkMultiplexer | None = None
        self._output = _TrackingWatermarkOutput(self)
        self._started = False
        self._ended = False
        self._finished_splits: set[str] = set()
        self._next_periodic: int | None = None
        self._taken: dict[int, Any] = {}
        """Positions snapshotted per checkpoint not yet completed, for a reader with a
        completion hook (`SourceReader.notify_checkpoint_complete`)."""
        self.failed_at: str | None = None
        """Where the batch was read whose processing down the chain raised (a user function
        chained to this source), for the task's failure report."""

    def assign_splits(self, splits: Sequence[SourceSplit]) -> None:
        self.splits = splits

    def initialize_state(self, restored: RestoredState | None) -> None:
        self.reader = self.source.create_reader(self.splits)
        positions: dict[str, Any] = {}
        for _, state in restored.operator if restored else ():
            positions.update(state or {})
        self.reader.restore(positions)

    def open(self) -> None:
        strategy = self.watermark_strategy
        if strategy.timestamp_assigner is not None:
            self._assigner = strategy.create_timestamp_assigner()
        self._summarizes = summarizes_batches(strategy)
        if not strategy.is_no_watermarks:
            context = self.context
            assert context is not None
            clock = context.processing_time
            self._watermarks = SplitWatermarkMultiplexer(
                lambda: strategy.create_watermark_generator(clock),
                self._output,
                bounded=self.source.bounded,
            )

    def emit_next(self, max_records: int) -> int:
        """Read up to `max_records` records of one split and emit them (and watermarks)."""
        reader = self.reader
        assert reader is not None
        if self._ended:
            return self.END_OF_INPUT
        if not self._started:
            self._start(reader)
        polled = reader.poll_split_batch(max_records)
        if polled is None:
            self._end_input()
            return self.END_OF_INPUT
        records = polled.records
        if len(records):
            try:
                self._emit(records, polled)
            except Exception:  # the timestamp assigner, or a function down the chain
                self.failed_at = self._position_of(polled.split_id, len(records))
                raise
        if polled.bad:
            self._on_bad_records(polled.bad)
        if polled.finished:
            self._finish_split(polled.split_id)
        more = records or polled.finished or polled.bad
        return self.MORE_AVAILABLE if more else self.NOTHING_AVAILABLE

    def _emit(self, records: Any, polled: SplitBatch) -> None:
        """The polled records, stamped, down the chain (and their event time to the split's
        watermark generator)."""
        batch = self._stamped(records, polled)
        watermarks = self._watermarks
        tracked = watermarks is not None and polled.split_id not in self._finished_splits
        if tracked and polled.split_id not in watermarks.live_splits:
            watermarks.register_split(polled.split_id)
        if self._output.idle and (watermarks is None or not watermarks.is_idle):
            # Idle since it started without splits; a split appeared (a monitored folder).
            self._output.emit_stream_status(StreamStatus.ACTIVE)
        if tracked:
            self._on_events(polled.split_id, batch)
        self.output.collect(batch)

    def stop(self, drain: bool) -> None:
        """Stop with savepoint: read nothing more. With `drain`, end the input as a bounded
        source does (MAX_WATERMARK, so every downstream window and event-time timer fires
        before the final checkpoint); without, stop emitting anything, watermarks included,
        so the savepoint holds the windows still open."""
        if self._ended:
            return
        if drain:
            self._end_input()
        else:
            self._ended = True
            self._next_periodic = None

    def poll_batch(self, max_records: int) -> list[Any] | None:
        """The values of the next batch, without event time (for tools and old callers)."""
        assert self.reader is not None
        return self.reader.poll_batch(max_records)

    def process_batch(self, batch: RecordBatch) -> None:
        raise TypeError("a source operator has no input")

    def next_wakeup(self) -> int | None:
        return self._next_periodic

    def on_processing_time(self, now_ms: int) -> None:
        if self._next_periodic is not None and now_ms >= self._next_periodic:
            assert self._watermarks is not None
            self._watermarks.on_periodic_emit()
            self._next_periodic = now_ms + self._interval()

    def snapshot_state(self, checkpoint_id: int, savepoint: bool = False) -> OperatorSnapshot:
        assert self.reader is not None
        positions = self.reader.snapshot()
        if (
            type(self.reader).notify_checkpoint_complete
            is not SourceReader.notify_checkpoint_complete
        ):
            self._taken[checkpoint_id] = positions  # for the reader's completion hook
        return OperatorSnapshot(operator=positions)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        positions = self._taken.pop(checkpoint_id, None)
        for older in [c for c in self._taken if c < checkpoint_id]:
            del self._taken[older]
        if positions is not None and self.reader is not None:
            self.reader.notify_checkpoint_complete(checkpoint_id, positions)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self._taken.pop(checkpoint_id, None)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()

    abort = close

    # ---- internals -----------------------------------------------------------------------

    def _interval(self) -> int:
        assert self.context is not None
        return self.context.auto_watermark_interval_ms

    def _start(self, reader: SourceReader) -> None:
        self._started = True
        split_ids = reader.split_ids()
        if self._watermarks is not None:
            for split_id in split_ids:
                self._watermarks.register_split(split_id, reader.reads_splits_in_turn)
            assert self.context is not None
            if self._interval() > 0:
                self._next_periodic = self.context.processing_time() + self._interval()
        if not split_ids:
            self._output.emit_stream_status(StreamStatus.IDLE)

    def _stamped(self, records: Any, polled: SplitBatch) -> AnyBatch:
        """The polled records as a batch, with the timestamps the strategy gives them."""
        column = self.watermark_strategy.timestamp_column
        if isinstance(records, pa.RecordBatch):
            converter = polled.converter or arrow_rows
            if column is not None:
                return ColumnarBatch(records, column_timestamps(records, column), converter)
            batch = ColumnarBatch(records, polled.timestamps, converter)
            if self._assigner is not None:
                return ColumnarBatch(
                    records, self._assign(batch.values, batch.timestamps), converter
                )
            return batch
        if not isinstance(records, list):
            records = list(records)  # a tuple or other sequence of values
        timestamps = polled.timestamps
        if column is not None:
            timestamps = row_timestamps(records, column)
        elif self._assigner is not None:
            timestamps = self._assign(records, timestamps)
        elif timestamps is not None and not isinstance(timestamps, list):
            timestamps = list(timestamps)
        return RecordBatch(records, timestamps)

    def _on_events(self, split_id: str, batch: AnyBatch) -> None:
        """Feed the split's watermark generator: the batch's greatest timestamp once when
        the generator only keeps the greatest (exact), otherwise every record."""
        watermarks = self._watermarks
        assert watermarks is not None
        on_event = watermarks.on_event
        if self._summarizes:
            if type(batch) is ColumnarBatch:
                stamps = batch.timestamp_array
                latest = NO_TIMESTAMP if stamps is None else int(stamps.max())
            else:
                latest = NO_TIMESTAMP if batch.timestamps is None else max(batch.timestamps)
            on_event(split_id, None, latest)
            return
        timestamps = batch.timestamps
        if timestamps is None:
            for value in batch.values:
                on_event(split_id, value, NO_TIMESTAMP)
        else:
            for value, timestamp in zip(batch.values, timestamps, strict=True):
                on_event(split_id, value, timestamp)

    def _assign(self, records: list[Any], timestamps: list[int] | None) -> list[int]:
        assert self._assigner is not None
        extract = self._assigner.extract_timestamp
        if timestamps is None:
            return [extract(value, NO_TIMESTAMP) for value in records]
        return [extract(value, ts) for value, ts in zip(records, timestamps, strict=True)]

    def _position_of(self, split_id: str, records: int) -> str:
        """`source 'lines', split 'a.txt', the batch of 12 records read up to offset 456`:
        the reader's position after the batch (read only on failure: no cost per batch)."""
        where = f"source {self.name!r}, split {split_id!r}, the batch of {records} record(s)"
        try:
            position = self.reader.snapshot().get(split_id) if self.reader else None
        except Exception:
            position = None
        if isinstance(position, (int, str)) and not isinstance(position, bool):
            return f"{where} read up to offset {position}"
        return where

    def _on_bad_records(self, bad: Sequence[BadRecord]) -> None:
        if not self.source.dead_letters:
            raise SourceError(bad[0].describe(self.name))
        letters = [DeadLetter.of(self.name, record) for record in bad]
        self.output.collect_side(DEAD_LETTERS.tag_id, RecordBatch(letters, None))

    def _finish_split(self, split_id: str) -> None:
        if split_id in self._finished_splits:
            return
        self._finished_splits.add(split_id)
        watermarks = self._watermarks
        if watermarks is not None and split_id in watermarks.live_splits:
            watermarks.finish_split(split_id)

    def _end_input(self) -> None:
        self._ended = True
        self._next_periodic = None
        if self._watermarks is not None:
            for split_id in self._watermarks.live_splits:
                self._finish_split(split_id)
        output = self._output
        if output.watermark < MAX_WATERMARK:
            output.emit_stream_status(StreamStatus.ACTIVE)
            output.emit_watermark(Watermark(MAX_WATERMARK))


class _TrackingWatermarkOutput:
    """The source's watermark output: passes on what changes, remembers where it stands."""

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator
        self.watermark = MIN_WATERMARK
        self.idle = False

    def emit_watermark(self, watermark: Watermark) -> None:
        if watermark.timestamp > self.watermark:
            self.watermark = watermark.timestamp
            self._operator.output.emit_watermark(watermark)

    def emit_stream_status(self, status: StreamStatus) -> None:
        idle = status is StreamStatus.IDLE
        if idle != self.idle:
            self.idle = idle
            self._operator.output.emit_stream_status(status)


class SinkOperator(StreamOperator):
    """Writes records between barriers as one transaction; commits on checkpoint complete."""

    def __init__(self, uid: str, name: str, sink: Sink) -> None:
        super().__init__(uid, name)
        self.sink = sink
        self.writer: SinkWriter | None = None

    def initialize_state(self, restored: RestoredState | None) -> None:
        context = self.context
        assert context is not None
        self.writer = self.sink.create_writer(
            SinkContext(
                operator_uid=self.uid,
                subtask_index=context.subtask_index,
                parallelism=context.parallelism,
                attempt=context.attempt,
                deployment_id=context.deployment_id,
                job_name=context.job_name,
                restored_checkpoint_id=context.restored_checkpoint_id,
                lineage=context.lineage,
                abandoned_above=context.abandoned_above,
                max_parallelism=context.max_parallelism,
                clock=context.clock,
            )
        )
        mine = [
            state
            for old_index, state in (restored.operator if restored else ())
            if old_index % context.parallelism == context.subtask_index and state is not None
        ]
        self.writer.restore(mine)

    def process_batch(self, batch: AnyBatch) -> None:
        """Columnar records whose rows would be `to_pylist()` dicts go to the writer as Arrow
        (`write_arrow`: the Arrow data is the batch, rows or not); the rest as Python values."""
        assert self.writer is not None
        if type(batch) is ColumnarBatch and batch.converter is arrow_rows:
            self.writer.write_arrow(batch.data)
        else:
            self.writer.write_batch(batch.values)

    def process_watermark(self, watermark: Watermark) -> None:
        pass  # sinks ignore event time

    def process_stream_status(self, status: StreamStatus) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int, savepoint: bool = False) -> OperatorSnapshot:
        assert self.writer is not None
        self.writer.pre_commit(checkpoint_id)
        return OperatorSnapshot(operator=self.writer.snapshot_state())

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        assert self.writer is not None
        self.writer.commit(checkpoint_id)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
