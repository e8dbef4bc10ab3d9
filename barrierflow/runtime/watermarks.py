"""The StatusWatermarkValve: how one input gate merges its channels' watermarks and statuses.

Pure logic (DESIGN §6): the valve owns no clock, thread or socket. The task feeds it
every watermark and stream status it reads, with the index of the channel it came
from, and the valve calls its `output` only when the gate's combined watermark grows
or the gate's status flips.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from barrierflow.runtime.elements import StreamStatus, Watermark

__all__ = ["MIN_WATERMARK", "ChannelStatus", "StatusWatermarkOutput", "StatusWatermarkValve"]

MIN_WATERMARK = -(2**63)
"""The watermark of a channel that has sent none yet: "no event time has passed"."""


class StatusWatermarkOutput(Protocol):
    """Where a valve (or a source's split multiplexer) sends what it decided to forward."""

    def emit_watermark(self, watermark: Watermark) -> None:
        """Forward a new combined watermark; each one is greater than the one before."""

    def emit_stream_status(self, status: StreamStatus) -> None:
        """Forward a status change; IDLE and ACTIVE alternate, starting with IDLE."""


@dataclass(frozen=True, slots=True)
class ChannelStatus:
    """A read-only view of what a valve knows about one input channel."""

    watermark: int
    """The greatest watermark the channel sent while active (`MIN_WATERMARK` before any)."""
    status: StreamStatus
    """Whether the channel is ACTIVE or IDLE."""
    is_aligned: bool
    """Whether the channel currently takes part in the minimum: active and caught up."""


class _Channel:
    __slots__ = ("active", "aligned", "watermark")

    def __init__(self) -> None:
        self.watermark = MIN_WATERMARK
        self.active = True
        self.aligned = True


class StatusWatermarkValve:
    """Merges the watermarks and stream statuses of an input gate's channels (Flink's valve).

    Mailbox thread only. Guarantees that the watermarks it emits strictly increase, that
    each is the minimum over the channels that are active and aligned (or, once every
    channel is idle, the maximum over all channels), and that the IDLE and ACTIVE it
    emits alternate, starting with IDLE. Assumes nothing about the order of the inputs:
    a watermark that does not grow its channel's watermark, or that arrives on an idle
    channel, is ignored.

    Every channel starts ACTIVE and aligned at `MIN_WATERMARK`, so the valve emits
    nothing until every channel has sent a watermark or gone idle. A channel that goes
    idle stops holding the watermark back; when it comes back it counts again only once
    its watermark has caught up with the last one the valve emitted.

    >>> class Print:
    ...     def emit_watermark(self, watermark): print(watermark)
    ...     def emit_stream_status(self, status): print(status)
    >>> valve = StatusWatermarkValve(2, Print())
    >>> valve.input_watermark(Watermark(10), 0)
    >>> valve.input_watermark(Watermark(7), 1)
    Watermark(timestamp=7)
    >>> valve.input_stream_status(StreamStatus.IDLE, 1)
    Watermark(timestamp=10)
    >>> valve.input_stream_status(StreamStatus.IDLE, 0)
    StreamStatus.IDLE
    """

    def __init__(self, num_channels: int, output: StatusWatermarkOutput) -> None:
        if num_channels < 1:
            raise ValueError(f"a valve needs at least one channel, got {num_channels}")
        self._channels = [_Channel() for _ in range(num_channels)]
        self._output = output
        self._last_output_watermark = MIN_WATERMARK
        self._idle = False

    @property
    def num_channels(self) -> int:
        """How many input channels the valve merges."""
        return len(self._channels)

    @property
    def last_output_watermark(self) -> int:
        """The last watermark the valve emitted (`MIN_WATERMARK` before the first)."""
        return self._last_output_watermark

    @property
    def is_idle(self) -> bool:
        """Whether the valve's last emitted status is IDLE (every channel is idle)."""
        return self._idle

    def channel_status(self, channel_index: int) -> ChannelStatus:
        """What the valve knows about one channel (for callers' metrics and for tests)."""
        channel = self._channel(channel_index)
        status = StreamStatus.ACTIVE if channel.active else StreamStatus.IDLE
        return ChannelStatus(channel.watermark, status, channel.aligned)

    def input_watermark(self, watermark: Watermark, channel_index: int) -> None:
        """Take a watermark read from a channel; emit a new combined watermark if it grows."""
        channel = self._channel(channel_index)
        # A watermark on an idle channel is ignored (the valve is idle only if all are).
        if not channel.active:
            return
        timestamp = watermark.timestamp
        # A watermark that does not grow its channel's watermark is ignored.
        if timestamp <= channel.watermark:
            return
        channel.watermark = timestamp
        # A channel that came back from idle counts again once it has caught up.
        if not channel.aligned and timestamp >= self._last_output_watermark:
            channel.aligned = True
        self._emit_min_over_aligned_channels()

    def input_stream_status(self, status: StreamStatus, channel_index: int) -> None:
        """Take a status read from a channel; emit what changes for the gate as a whole."""
        channel = self._channel(channel_index)
        if status is StreamStatus.IDLE and channel.active:
            channel.active = False
            channel.aligned = False
            if not any(c.active for c in self._channels):
                # No channel will advance any more: flush the greatest watermark, then go
                # idle. Deliberate deviation: Flink flushes only if this channel's watermark
                # equals the last output watermark, which skips the flush when the last
                # active channel is still catching up while an idle one is ahead (see
                # test_the_flush_does_not_depend_on_which_channel_goes_idle_last).
                self._emit_max_over_all_channels()
                self._idle = True
                self._output.emit_stream_status(StreamStatus.IDLE)
            elif channel.watermark == self._last_output_watermark:
                # The channel may have been the one holding the minimum back.
                self._emit_min_over_aligned_channels()
        elif status is StreamStatus.ACTIVE and not channel.active:
            channel.active = True
            # Its watermark from before it went idle may still be ahead of the output.
            if channel.watermark >= self._last_output_watermark:
                channel.aligned = True
            if self._idle:
                self._idle = False
                self._output.emit_stream_status(StreamStatus.ACTIVE)

    def _channel(self, channel_index: int) -> _Channel:
        if not 0 <= channel_index < len(self._channels):
            raise IndexError(
                f"channel index {channel_index} is out of range for a valve "
                f"of {len(self._channels)} channels"
            )
        return self._channels[channel_index]

    def _emit_min_over_aligned_channels(self) -> None:
        aligned = [c.watermark for c in self._channels if c.aligned]
        # With no active channel aligned there is no minimum to emit.
        if aligned:
            self._emit_if_greater(min(aligned))

    def _emit_max_over_all_channels(self) -> None:
        self._emit_if_greater(max(c.watermark for c in self._channels))

    def _emit_if_greater(self, timestamp: int) -> None:
        if timestamp > self._last_output_watermark:
            self._last_output_watermark = timestamp
            self._output.emit_watermark(Watermark(timestamp))
