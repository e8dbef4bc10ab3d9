"""ChannelLedger: the per-channel bookkeeping every barrier handler keeps, kept once.

`CheckpointBarrierAligner`, `CheckpointBarrierTracker` and `CheckpointBarrierUnaligner` each
need the same facts about their input channels: which channels are still open (an ended
channel is no longer waited for), the id of the last barrier each channel delivered (ids must
increase on a channel), and the newest checkpoint id seen in any barrier or cancellation
marker (an older one is late). The ledger keeps them and refuses a stream that breaks channel
order with `StreamCorruptionError`; the handlers keep only what is theirs (which channels are
blocked or persisting for the checkpoint they work on).

=================================  =============================================================
event                              ledger
=================================  =============================================================
barrier n on an open channel       recorded as the channel's last; answers whether n is newer
                                   than every id seen (then n is the newest)
barrier n, n not newer than the    `StreamCorruptionError` ("twice", or "after that of
channel's last                     checkpoint m")
cancel marker n on an open channel answers whether n is newer than every id seen (then n is the
                                   newest); a channel's last barrier does not change
end of partition                   the channel is closed: one open channel less
anything after a channel's end     `StreamCorruptionError` ("after it ended", "a second end of
                                   partition")
a channel outside the inputs       `ValueError`
=================================  =============================================================

>>> ledger = ChannelLedger(2)
>>> ledger.barrier(0, 1), ledger.barrier(1, 1), ledger.latest_checkpoint_id
(True, False, 1)
>>> ledger.end(0)
>>> ledger.open_channel_count, ledger.is_open(0)
(1, False)
"""

from __future__ import annotations

from barrierflow.errors import StreamCorruptionError

__all__ = ["ChannelLedger"]

_NONE_SEEN = -1
"""Below every checkpoint id: what the newest id and each channel's last barrier start at."""


class ChannelLedger:
    """Which input channels are open, their last barrier, the newest id; mailbox thread only.

    Pure: no clock, socket or thread. Assumes checkpoint ids are >= 0.
    """

    __slots__ = ("_channel_count", "_ended", "_last_barrier", "_latest", "_open_count")

    def __init__(self, channel_count: int, owner: str = "a barrier handler") -> None:
        """`owner` names the handler in the error for fewer than one channel."""
        if channel_count < 1:
            raise ValueError(f"{owner} needs at least one input channel, not {channel_count}")
        self._channel_count = channel_count
        self._ended = [False] * channel_count
        self._open_count = channel_count
        self._last_barrier = [_NONE_SEEN] * channel_count
        self._latest = _NONE_SEEN

    # ---- read-only views ---------------------------------------------------------------------

    @property
    def channel_count(self) -> int:
        """How many input channels the task has, open or ended."""
        return self._channel_count

    @property
    def open_channel_count(self) -> int:
        """How many channels have not delivered their end of partition."""
        return self._open_count

    def is_open(self, channel: int) -> bool:
        """Whether `channel` has not delivered its end of partition."""
        return not self._ended[channel]

    @property
    def open_channels(self) -> frozenset[int]:
        """The channels that have not delivered their end of partition."""
        return frozenset(c for c, ended in enumerate(self._ended) if not ended)

    def all_open(self, channels: set[int] | frozenset[int]) -> bool:
        """Whether `channels`, a set of open channels, holds every open channel."""
        return len(channels) >= self._open_count

    @property
    def latest_checkpoint_id(self) -> int | None:
        """The newest checkpoint id seen in any barrier or cancellation marker, or None."""
        return None if self._latest == _NONE_SEEN else self._latest

    # ---- events ------------------------------------------------------------------------------

    def barrier(self, channel: int, checkpoint_id: int) -> bool:
        """Open `channel` delivered the barrier of `checkpoint_id`; True if it is the newest
        id seen so far (then it is recorded as such)."""
        self.check_open(channel, f"the barrier of checkpoint {checkpoint_id}")
        last = self._last_barrier[channel]
        if checkpoint_id <= last:
            raise StreamCorruptionError(
                f"channel {channel} delivered the barrier of checkpoint {checkpoint_id} "
                + ("twice" if checkpoint_id == last else f"after that of checkpoint {last}")
            )
        self._last_barrier[channel] = checkpoint_id
        return self._see(checkpoint_id)

    def cancel_marker(self, channel: int, checkpoint_id: int) -> bool:
        """Open `channel` delivered the cancellation marker of `checkpoint_id`; True if it is
        the newest id seen so far (then it is recorded as such)."""
        self.check_open(channel, f"the cancellation marker of checkpoint {checkpoint_id}")
        return self._see(checkpoint_id)

    def end(self, channel: int) -> None:
        """Open `channel` delivered its end of partition: nothing more comes on it."""
        self.check_open(channel, "a second end of partition")
        self._ended[channel] = True
        self._open_count -= 1

    def check_open(self, channel: int, what: str) -> None:
        """Raise unless `channel` is one of the inputs and open; `what` names what it delivered."""
        if not 0 <= channel < self._channel_count:
            raise ValueError(f"channel {channel} is not one of the {self._channel_count} inputs")
        if self._ended[channel]:
            raise StreamCorruptionError(f"channel {channel} delivered {what} after it ended")

    # ---- internals ---------------------------------------------------------------------------

    def _see(self, checkpoint_id: int) -> bool:
        if checkpoint_id <= self._latest:
            return False
        self._latest = checkpoint_id
        return True
