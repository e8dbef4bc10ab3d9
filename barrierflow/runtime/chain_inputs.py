"""How a task hands what its input channels deliver to the first operator of its chain.

Mailbox thread only. Each input of the first operator (one, or two for a two-input
operator) gets a StatusWatermarkValve over the channels that feed it; record batches
go straight to the operator's `process_batch` (or `process_batch1/2`), watermarks and
statuses through the valve of their input, which calls the operator only when the
input's combined watermark grows or its status flips. A channel that ended counts as
MAX_WATERMARK from then on (Flink: a finished input no longer holds event time back).
"""

from __future__ import annotations

from collections.abc import Callable

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.metrics.operator_metrics import OperatorMetrics
from barrierflow.runtime.operators.base import StreamOperator, TwoInputStreamOperator
from barrierflow.runtime.watermarks import StatusWatermarkValve

__all__ = ["ChainInputs"]


class ChainInputs:
    """Routes one task's input channels into its first operator (see the module docstring).

    >>> from barrierflow.runtime.chain_outputs import CollectingOutput
    >>> from barrierflow.runtime.operators.stateless import MapOperator
    >>> head, out = MapOperator("m", "m", str), CollectingOutput()
    >>> head.output = out
    >>> inputs = ChainInputs(head, [0, 0])  # two channels into the one input
    >>> inputs.watermark(0, Watermark(5))
    >>> inputs.watermark(1, Watermark(3))
    >>> inputs.end_of_partition(1)
    >>> out.take()
    [('watermark', 3), ('watermark', 5)]
    """

    def __init__(
        self,
        operator: StreamOperator,
        channel_inputs: list[int],
        metrics: OperatorMetrics | None = None,
    ) -> None:
        """`channel_inputs[c]` is the operator input (0 or 1) that channel `c` feeds;
        `metrics` (the operator's) notes each input's watermark as the valve forwards it."""
        valves: dict[int, StatusWatermarkValve] = {}
        for input_index in sorted(set(channel_inputs)):
            valves[input_index] = StatusWatermarkValve(
                channel_inputs.count(input_index), _InputOf(operator, input_index, metrics)
            )
        self._valves: list[tuple[StatusWatermarkValve, int]] = []
        self._processors: list[Callable[[RecordBatch], None]] = []
        seen: dict[int, int] = {}
        for input_index in channel_inputs:
            self._valves.append((valves[input_index], seen.get(input_index, 0)))
            seen[input_index] = seen.get(input_index, 0) + 1
            self._processors.append(_processor(operator, input_index))

    def records(self, channel: int, batch: RecordBatch) -> None:
        self._processors[channel](batch)

    def watermark(self, channel: int, watermark: Watermark) -> None:
        valve, index = self._valves[channel]
        valve.input_watermark(watermark, index)

    def stream_status(self, channel: int, status: StreamStatus) -> None:
        valve, index = self._valves[channel]
        valve.input_stream_status(status, index)

    def end_of_partition(self, channel: int) -> None:
        """The channel ended: from now on it counts as an active channel at MAX_WATERMARK."""
        valve, index = self._valves[channel]
        valve.input_stream_status(StreamStatus.ACTIVE, index)
        valve.input_watermark(Watermark(MAX_WATERMARK), index)


def _processor(operator: StreamOperator, input_index: int) -> Callable[[RecordBatch], None]:
    if isinstance(operator, TwoInputStreamOperator):
        return operator.process_batch1 if input_index == 0 else operator.process_batch2
    if input_index != 0:
        raise StreamCorruptionError(f"{operator.name} has one input, got input {input_index}")
    return operator.process_batch


class _InputOf:
    """Where the valve of one operator input sends what it decided: into that input."""

    def __init__(
        self, operator: StreamOperator, input_index: int, metrics: OperatorMetrics | None
    ) -> None:
        process_watermark: Callable[[Watermark], None]
        if isinstance(operator, TwoInputStreamOperator):
            first = input_index == 0
            process_watermark = (
                operator.process_watermark1 if first else operator.process_watermark2
            )
            self.emit_stream_status = (
                operator.process_stream_status1 if first else operator.process_stream_status2
            )
        else:
            process_watermark = operator.process_watermark
            self.emit_stream_status = operator.process_stream_status
        self.emit_watermark = process_watermark
        if metrics is not None:

            def emit_watermark(watermark: Watermark) -> None:
                metrics.note_input_watermark(input_index, watermark.timestamp)
                process_watermark(watermark)

            self.emit_watermark = emit_watermark
