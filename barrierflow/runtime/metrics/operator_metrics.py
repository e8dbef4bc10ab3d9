"""OperatorMetrics: what one operator of a chain took in and emitted, counted per batch.

Each operator's output is wrapped in a `MeteredOutput`, which adds a batch's length to the
operator's records out and, inside a chain, to the next operator's records in, and notes
the watermarks going by; the task adds what the head takes from the input channels. So
counting costs one call and two integer additions per batch, never a call per record.
Side outputs count as records out. A latency marker passing an output is recorded in the
next operator's `latency` (its age, per source vertex) before it goes on; the chain
records it for the head. Mailbox thread only.

>>> from barrierflow.runtime.batch import RecordBatch
>>> from barrierflow.runtime.chain_outputs import CollectingOutput
>>> from barrierflow.runtime.elements import LatencyMarker, Watermark
>>> first, second = OperatorMetrics("a", "Map"), OperatorMetrics("b", "Filter")
>>> output = MeteredOutput(CollectingOutput(), first, second)
>>> output.collect(RecordBatch([1, 2, 3]))
>>> output.emit_watermark(Watermark(42))
>>> first.records_out, second.records_in, second.watermark
(3, 3, 42)
>>> output = MeteredOutput(CollectingOutput(), first, second, now_ms=lambda: 1_250)
>>> output.emit_latency_marker(LatencyMarker(1_000, source_vertex_id=0, source_subtask=1))
>>> second.latency[0].summary()[:4]   # count, sum, min, max of the ages in ms
(1, 250.0, 250.0, 250.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barrierflow.core.metrics import Distribution
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import LatencyMarker, StreamStatus, Watermark
from barrierflow.runtime.operators.base import Output
from barrierflow.runtime.watermarks import MIN_WATERMARK

__all__ = ["MeteredOutput", "OperatorMetrics"]


class OperatorMetrics:
    """Counters of one operator of one attempt (plain ints, mailbox thread only)."""

    __slots__ = ("_inputs", "latency", "name", "records_in", "records_out", "uid", "watermark")

    def __init__(self, uid: str, name: str, inputs: int = 1) -> None:
        self.uid = uid
        self.name = name
        self.records_in = 0
        self.records_out = 0
        self.watermark = MIN_WATERMARK
        """The operator's current input watermark (a source's: its output watermark);
        MIN_WATERMARK before the first."""
        self._inputs = [MIN_WATERMARK] * inputs
        self.latency: dict[int, Distribution] = {}
        """Ages (ms) of the latency markers that reached the operator, by source vertex id;
        empty unless latency tracking is on. The task's wall clock minus the source's, so
        clock skew between hosts shows (as in Flink), even below zero."""

    def record_latency(self, marker: LatencyMarker, now_ms: int) -> None:
        """A latency marker reached the operator at `now_ms` (wall clock)."""
        distribution = self.latency.get(marker.source_vertex_id)
        if distribution is None:
            distribution = self.latency[marker.source_vertex_id] = Distribution()
        distribution.update(now_ms - marker.marked_time_ms)

    def note_input_watermark(self, input_index: int, timestamp: int) -> None:
        """Input `input_index` reached `timestamp`; the operator's watermark is the minimum
        over its inputs."""
        inputs = self._inputs
        inputs[input_index] = timestamp
        self.watermark = min(inputs)


class MeteredOutput:
    """An operator's output that counts what passes (see the module docstring)."""

    def __init__(
        self,
        inner: Output,
        metrics: OperatorMetrics,
        downstream: OperatorMetrics | None,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        """`downstream`: the next operator of the chain, None for the chain's last one;
        `now_ms`: the task's wall clock (epoch ms), which dates the latency markers."""
        self._inner = inner
        self._metrics = metrics
        self._downstream = downstream
        self._now_ms = now_ms
        self._is_source = False

    def counts_as_source(self) -> None:
        """The operator has no input: its output watermark is its watermark."""
        self._is_source = True

    def collect(self, batch: RecordBatch) -> None:
        count = len(batch)
        self._metrics.records_out += count
        downstream = self._downstream
        if downstream is not None:
            downstream.records_in += count
        self._inner.collect(batch)

    def collect_side(self, tag_id: str, batch: RecordBatch) -> None:
        self._metrics.records_out += len(batch)
        self._inner.collect_side(tag_id, batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        timestamp = watermark.timestamp
        if self._is_source:
            self._metrics.watermark = timestamp
        downstream = self._downstream
        if downstream is not None:
            downstream.note_input_watermark(0, timestamp)
        self._inner.emit_watermark(watermark)

    def emit_stream_status(self, status: StreamStatus) -> None:
        self._inner.emit_stream_status(status)

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        downstream, now_ms = self._downstream, self._now_ms
        if downstream is not None and now_ms is not None:
            downstream.record_latency(marker, now_ms())
        self._inner.emit_latency_marker(marker)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # e.g. tests reading a CollectingOutput through it
