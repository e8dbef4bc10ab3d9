"""How an operator with several inputs combines their watermarks and statuses.

Pure logic (DESIGN §6), Flink's `IndexedCombinedWatermarkStatus`: a two-input
operator (connect, joins) gets each input's watermark and status, already merged
over that input's channels by the input's `StatusWatermarkValve`, and acts on the
minimum over its inputs.
"""

from __future__ import annotations

from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.watermarks import MIN_WATERMARK, StatusWatermarkOutput

__all__ = ["IndexedCombinedWatermarkStatus"]


class IndexedCombinedWatermarkStatus:
    """Combines the watermarks and statuses of an operator's inputs (Flink's class).

    Mailbox thread only. Guarantees that the watermarks it emits strictly increase and
    that each is the minimum over the inputs that are not idle; that IDLE is emitted
    when every input is idle and ACTIVE when one comes back, each only on a change.
    Every input starts ACTIVE at `MIN_WATERMARK`, so nothing is emitted until each
    input has sent a watermark or gone idle. An idle input keeps the watermarks it
    receives: when it comes back they count again, but the combined watermark never
    goes back. Unlike the valve, nothing is flushed when every input goes idle
    (as in Flink: the inputs' valves already flushed theirs).

    >>> class Print:
    ...     def emit_watermark(self, watermark): print(watermark)
    ...     def emit_stream_status(self, status): print(status)
    >>> combined = IndexedCombinedWatermarkStatus(2, Print())
    >>> combined.input_watermark(Watermark(10), 0)
    >>> combined.input_watermark(Watermark(4), 1)
    Watermark(timestamp=4)
    >>> combined.input_stream_status(StreamStatus.IDLE, 1)
    Watermark(timestamp=10)
    >>> combined.input_stream_status(StreamStatus.IDLE, 0)
    StreamStatus.IDLE
    """

    def __init__(self, num_inputs: int, output: StatusWatermarkOutput) -> None:
        if num_inputs < 1:
            raise ValueError(f"an operator needs at least one input, got {num_inputs}")
        self._watermarks = [MIN_WATERMARK] * num_inputs
        self._idle = [False] * num_inputs
        self._output = output
        self._combined = MIN_WATERMARK
        self._all_idle = False

    @property
    def combined_watermark(self) -> int:
        """The last watermark emitted (`MIN_WATERMARK` before the first)."""
        return self._combined

    @property
    def is_idle(self) -> bool:
        """Whether every input is idle."""
        return self._all_idle

    def input_watermark(self, watermark: Watermark, input_index: int) -> None:
        """Take input `input_index`'s new watermark; emit the combined one if it grows."""
        self._check(input_index)
        if watermark.timestamp > self._watermarks[input_index]:
            self._watermarks[input_index] = watermark.timestamp
            if not self._idle[input_index]:
                self._emit_minimum()

    def input_stream_status(self, status: StreamStatus, input_index: int) -> None:
        """Take input `input_index`'s new status; emit what changes for the operator."""
        self._check(input_index)
        idle = status is StreamStatus.IDLE
        if self._idle[input_index] == idle:
            return
        self._idle[input_index] = idle
        all_idle = all(self._idle)
        if not all_idle:
            if self._all_idle:
                self._all_idle = False
                self._output.emit_stream_status(StreamStatus.ACTIVE)
            # An input going idle may have been the one holding the minimum back.
            self._emit_minimum()
        elif not self._all_idle:
            self._all_idle = True
            self._output.emit_stream_status(StreamStatus.IDLE)

    def _emit_minimum(self) -> None:
        minimum = min(w for w, idle in zip(self._watermarks, self._idle, strict=True) if not idle)
        if minimum > self._combined:
            self._combined = minimum
            self._output.emit_watermark(Watermark(minimum))

    def _check(self, input_index: int) -> None:
        if not 0 <= input_index < len(self._watermarks):
            raise IndexError(
                f"input index {input_index} is out of range for {len(self._watermarks)} inputs"
            )
