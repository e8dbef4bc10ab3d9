"""OperatorMetrics: what one operator of a chain took in and emitted, counted per batch.

Each operator's output is wrapped in a `MeteredOutput`, which adds a batch's length to the
operator's records out and, inside a chain, to the next operator's records in, and notes
the watermarks going by; the task adds what the head takes from the input channels. So
counting costs one call and two integer additions per batch, never a call per record.
Side outputs count as records out. Mailbox thread only.

>>> from barrierflow.runtime.batch import RecordBatch
>>> from barrierflow.runtime.chain_outputs import CollectingOutput
>>> from barrierflow.runtime.elements import Watermark
>>> first, second = OperatorMetrics("a", "Map"), OperatorMetrics("b", "Filter")
>>> output = MeteredOutput(CollectingOutput(), first, second)
>>> output.collect(RecordBatch([1, 2, 3]))
>>> output.emit_watermark(Watermark(42))
>>> first.records_out, second.records_in, second.watermark
(3, 3, 42)
"""

from __future__ import annotations

from typing import Any

from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.operators.base import Output
from barrierflow.runtime.watermarks import MIN_WATERMARK

__all__ = ["MeteredOutput", "OperatorMetrics"]


class OperatorMetrics:
    """Counters of one operator of one attempt (plain ints, mailbox thread only)."""

    __slots__ = ("_inputs", "name", "records_in", "records_out", "uid", "watermark")

    def __init__(self, uid: str, name: str, inputs: int = 1) -> None:
        self.uid = uid
        self.name = name
        self.records_in = 0
        self.records_out = 0
        self.watermark = MIN_WATERMARK
        """The operator's current input watermark (a source's: its output watermark);
        MIN_WATERMARK before the first."""
        self._inputs = [MIN_WATERMARK] * inputs

    def note_input_watermark(self, input_index: int, timestamp: int) -> None:
        """Input `input_index` reached `timestamp`; the operator's watermark is the minimum
        over its inputs."""
        inputs = self._inputs
        inputs[input_index] = timestamp
        self.watermark = min(inputs)


class MeteredOutput:
    """An operator's output that counts what passes (see the module docstring)."""

    def __init__(
        self, inner: Output, metrics: OperatorMetrics, downstream: OperatorMetrics | None
    ) -> None:
        """`downstream`: the next operator of the chain, None for the chain's last one."""
        self._inner = inner
        self._metrics = metrics
        self._downstream = downstream
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

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)  # e.g. tests reading a CollectingOutput through it
