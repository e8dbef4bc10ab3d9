"""CheckpointBarrierAligner: exactly-once barrier alignment over one task's input channels.

Flink's `CheckpointBarrierAligner` (later `SingleCheckpointBarrierHandler.aligned`), as a
pure object: the task hands it every barrier, cancellation marker and end of partition it
polls, and asks `is_blocked(channel)` before each poll. The rules, for checkpoint n:

=================================  =============================================================
event                              decision
=================================  =============================================================
barrier n, n newer than all seen   start aligning n (aborting an older alignment as subsumed),
                                   block the channel
barrier n, n being aligned         block the channel
last open channel delivers n       trigger n, unblock every channel
barrier n, n not newer, not        nothing: a late barrier of a completed, cancelled or subsumed
being aligned                      checkpoint
cancel marker n, n being aligned   abort n (cancellation barrier), unblock every channel
cancel marker n, n newer than all  abort the alignment in progress (subsumed), abort n
                                   (cancellation barrier); later barriers of n are late
cancel marker n, otherwise         nothing: every cancellation is reported once
end of partition                   stop waiting for the channel; trigger n if every open channel
                                   has now delivered it, abort n (input ended) if none is open
=================================  =============================================================

A stream that breaks channel order raises `StreamCorruptionError`: a barrier id that is not
newer than the previous barrier on the same channel, or any event after a channel's end of
partition.
"""

from __future__ import annotations

from barrierflow.runtime.barriers.decisions import (
    NOTHING,
    AbortCheckpoint,
    Decision,
    TriggerCheckpoint,
)
from barrierflow.runtime.barriers.ledger import ChannelLedger
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier

__all__ = ["CheckpointBarrierAligner"]


class CheckpointBarrierAligner:
    """Exactly-once barrier alignment across input channels; mailbox thread only.
    Exactly-once: from the moment a channel delivers the barrier of checkpoint n until n is
    triggered or aborted, the channel is blocked, so no record that follows a barrier reaches
    the operators before their snapshot. Assumes that checkpoint ids increase on every channel
    and that the task never polls a channel while `is_blocked(channel)` is true.

    Owns no clock, socket or thread; each event method returns a tuple of decisions.

    >>> from barrierflow.runtime.elements import CheckpointBarrier
    >>> aligner = CheckpointBarrierAligner(2)
    >>> aligner.on_barrier(0, CheckpointBarrier(1, timestamp=5))
    ()
    >>> aligner.is_blocked(0), aligner.is_blocked(1)
    (True, False)
    >>> aligner.on_barrier(1, CheckpointBarrier(1, timestamp=5))
    (TriggerCheckpoint(barrier=CheckpointBarrier(checkpoint_id=1, timestamp=5)),)
    >>> aligner.blocked_channels
    frozenset()
    """

    __slots__ = ("_aligning", "_blocked", "_blocked_count", "_channel_count", "_ledger")

    def __init__(self, channel_count: int) -> None:
        self._ledger = ChannelLedger(channel_count, "an aligner")
        """Open channels, each channel's last barrier, the newest id seen."""
        self._channel_count = channel_count
        self._blocked = [False] * channel_count
        self._blocked_count = 0
        self._aligning: CheckpointBarrier | None = None
        """The first barrier of the checkpoint being aligned; None between alignments."""

    # ---- read-only views ---------------------------------------------------------------------

    def is_blocked(self, channel: int) -> bool:
        """Whether the task must not poll `channel` now (it delivered the barrier being aligned)."""
        return self._blocked[channel]

    @property
    def current_checkpoint_id(self) -> int | None:
        """The checkpoint being aligned, or None."""
        return None if self._aligning is None else self._aligning.checkpoint_id

    @property
    def latest_checkpoint_id(self) -> int | None:
        """The newest checkpoint id seen in any barrier or cancellation marker, or None."""
        return self._ledger.latest_checkpoint_id

    @property
    def blocked_channels(self) -> frozenset[int]:
        """The channels the task must not poll now."""
        return frozenset(c for c, blocked in enumerate(self._blocked) if blocked)

    @property
    def open_channel_count(self) -> int:
        """How many channels have not delivered their end of partition."""
        return self._ledger.open_channel_count

    # ---- events ------------------------------------------------------------------------------

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> tuple[Decision, ...]:
        """Channel `channel` delivered `barrier`."""
        checkpoint_id = barrier.checkpoint_id
        if self._ledger.barrier(channel, checkpoint_id):  # newer than every id seen
            subsumed = self._abort_alignment_as_subsumed()
            self._aligning = barrier
            return subsumed + self._block(channel)
        if self._aligning is not None and checkpoint_id == self._aligning.checkpoint_id:
            return self._block(channel)
        return NOTHING

    def on_cancel_marker(
        self, channel: int, marker: CancelCheckpointMarker
    ) -> tuple[Decision, ...]:
        """Channel `channel` delivered `marker`: an upstream task aborted that checkpoint."""
        checkpoint_id = marker.checkpoint_id
        if self._ledger.cancel_marker(channel, checkpoint_id):  # newer than every id seen
            subsumed = self._abort_alignment_as_subsumed()
            return (*subsumed, AbortCheckpoint.on_cancellation_barrier(checkpoint_id))
        if self._aligning is not None and checkpoint_id == self._aligning.checkpoint_id:
            self._release()
            return (AbortCheckpoint.on_cancellation_barrier(checkpoint_id),)
        return NOTHING

    def on_end_of_partition(self, channel: int) -> tuple[Decision, ...]:
        """Channel `channel` ended: nothing more comes on it, so it is no longer waited for."""
        self._ledger.end(channel)
        if self._blocked[channel]:
            # Only reachable if the caller polled a blocked channel; stay consistent anyway.
            self._blocked[channel] = False
            self._blocked_count -= 1
        if self._aligning is None:
            return NOTHING
        if self._ledger.open_channel_count == 0:
            checkpoint_id = self._aligning.checkpoint_id
            self._release()
            return (AbortCheckpoint.input_ended(checkpoint_id),)
        return self._trigger_if_aligned()

    # ---- internals ---------------------------------------------------------------------------

    def _block(self, channel: int) -> tuple[Decision, ...]:
        self._blocked[channel] = True
        self._blocked_count += 1
        return self._trigger_if_aligned()

    def _trigger_if_aligned(self) -> tuple[Decision, ...]:
        # Blocked channels are always open, so equal counts mean every open channel is blocked.
        if self._aligning is None or self._blocked_count < self._ledger.open_channel_count:
            return NOTHING
        barrier = self._aligning
        self._release()
        return (TriggerCheckpoint(barrier),)

    def _abort_alignment_as_subsumed(self) -> tuple[Decision, ...]:
        if self._aligning is None:
            return NOTHING
        checkpoint_id = self._aligning.checkpoint_id
        self._release()
        return (AbortCheckpoint.subsumed(checkpoint_id),)

    def _release(self) -> None:
        """End the alignment in progress and unblock every channel."""
        self._aligning = None
        if self._blocked_count:
            self._blocked = [False] * self._channel_count
            self._blocked_count = 0
