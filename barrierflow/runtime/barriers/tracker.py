"""CheckpointBarrierTracker: at-least-once barrier tracking over one task's input channels.

Flink's `CheckpointBarrierTracker` as a pure object, with the same event methods and
decisions as `CheckpointBarrierAligner`, so a task can use either. It never blocks a
channel: records that follow a barrier on one channel may be processed before the barrier
has arrived on the others, so after a recovery they may be counted twice. In return a slow
channel never holds back the fast ones. The rules, for checkpoint n:

=================================  =============================================================
event                              decision
=================================  =============================================================
barrier n, n pending               count the channel; when every open channel has delivered n,
                                   trigger n and silently drop the older pending checkpoints
barrier n, n newer than all seen   n becomes pending (and triggers at once with one channel)
barrier n, otherwise               nothing: n was triggered, cancelled, dropped, or a newer
                                   barrier came first on some channel, so n cannot complete
cancel marker n, n pending or      abort the older pending checkpoints (subsumed), abort n
newer than all seen                (cancellation barrier); later barriers of n are ignored
cancel marker n, otherwise         nothing: every cancellation is reported once
end of partition                   stop waiting for the channel; trigger the pending checkpoints
                                   that are now complete, oldest first; if no channel is left
                                   open, abort every pending checkpoint (input ended)
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

__all__ = ["MAX_CHECKPOINTS_TO_TRACK", "CheckpointBarrierTracker"]

MAX_CHECKPOINTS_TO_TRACK = 50
"""Pending checkpoints kept at most; beyond it the oldest is dropped silently (as in Flink)."""


class _PendingCheckpoint:
    """A checkpoint whose barrier arrived on some channels but not yet on all open ones."""

    __slots__ = ("arrived", "barrier")

    def __init__(self, barrier: CheckpointBarrier) -> None:
        self.barrier = barrier
        """The first barrier of this checkpoint; the one a trigger forwards."""
        self.arrived: set[int] = set()
        """The open channels that delivered it."""


class CheckpointBarrierTracker:
    """At-least-once barrier tracking that never blocks a channel; mailbox thread only.
    At-least-once only: records after a barrier may be processed before the snapshot of that
    barrier's checkpoint. Assumes that checkpoint ids increase on every channel.

    Several checkpoints may be pending at once; each triggers when its barrier has arrived on
    every open channel. Owns no clock, socket or thread; each event method returns a tuple of
    decisions.

    >>> from barrierflow.runtime.elements import CheckpointBarrier
    >>> tracker = CheckpointBarrierTracker(2)
    >>> tracker.on_barrier(0, CheckpointBarrier(1, timestamp=5))
    ()
    >>> tracker.on_barrier(0, CheckpointBarrier(2, timestamp=7))
    ()
    >>> tracker.is_blocked(0), tracker.pending_checkpoint_ids
    (False, (1, 2))
    >>> tracker.on_barrier(1, CheckpointBarrier(2, timestamp=7))
    (TriggerCheckpoint(barrier=CheckpointBarrier(checkpoint_id=2, timestamp=7)),)
    >>> tracker.pending_checkpoint_ids
    ()
    """

    __slots__ = ("_ledger", "_pending")

    def __init__(self, channel_count: int) -> None:
        self._ledger = ChannelLedger(channel_count, "a tracker")
        """Open channels, each channel's last barrier, the newest id seen."""
        self._pending: dict[int, _PendingCheckpoint] = {}
        """Pending checkpoints by id, oldest first (ids are added in increasing order)."""

    # ---- read-only views ---------------------------------------------------------------------

    def is_blocked(self, channel: int) -> bool:
        """Always False: the tracker never blocks a channel."""
        return False

    @property
    def pending_checkpoint_ids(self) -> tuple[int, ...]:
        """The checkpoints waiting for barriers, oldest first."""
        return tuple(self._pending)

    @property
    def open_channel_count(self) -> int:
        """How many channels have not delivered their end of partition."""
        return self._ledger.open_channel_count

    # ---- events ------------------------------------------------------------------------------

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> tuple[Decision, ...]:
        """Channel `channel` delivered `barrier`."""
        checkpoint_id = barrier.checkpoint_id
        newest = self._ledger.barrier(channel, checkpoint_id)
        pending = self._pending.get(checkpoint_id)
        if pending is None:
            if not newest:
                return NOTHING
            pending = self._pending[checkpoint_id] = _PendingCheckpoint(barrier)
            if len(self._pending) > MAX_CHECKPOINTS_TO_TRACK:
                del self._pending[next(iter(self._pending))]
        pending.arrived.add(channel)
        if not self._ledger.all_open(pending.arrived):
            return NOTHING
        return (self._trigger(checkpoint_id),)

    def on_cancel_marker(
        self, channel: int, marker: CancelCheckpointMarker
    ) -> tuple[Decision, ...]:
        """Channel `channel` delivered `marker`: an upstream task aborted that checkpoint."""
        checkpoint_id = marker.checkpoint_id
        newest = self._ledger.cancel_marker(channel, checkpoint_id)
        if checkpoint_id not in self._pending and not newest:
            return NOTHING
        older = [pending_id for pending_id in self._pending if pending_id < checkpoint_id]
        for pending_id in older:
            del self._pending[pending_id]
        self._pending.pop(checkpoint_id, None)
        return (
            *(AbortCheckpoint.subsumed(pending_id) for pending_id in older),
            AbortCheckpoint.on_cancellation_barrier(checkpoint_id),
        )

    def on_end_of_partition(self, channel: int) -> tuple[Decision, ...]:
        """Channel `channel` ended: nothing more comes on it, so it is no longer waited for."""
        self._ledger.end(channel)
        for pending in self._pending.values():
            pending.arrived.discard(channel)
        if self._ledger.open_channel_count == 0:
            aborted = tuple(AbortCheckpoint.input_ended(pending_id) for pending_id in self._pending)
            self._pending.clear()
            return aborted
        complete = [
            pending_id
            for pending_id, pending in self._pending.items()
            if self._ledger.all_open(pending.arrived)
        ]
        return tuple(self._trigger(pending_id) for pending_id in complete)

    # ---- internals ---------------------------------------------------------------------------

    def _trigger(self, checkpoint_id: int) -> TriggerCheckpoint:
        """Trigger a pending checkpoint and silently drop every older one (it cannot complete)."""
        barrier = self._pending.pop(checkpoint_id).barrier
        for older_id in [pending_id for pending_id in self._pending if pending_id < checkpoint_id]:
            del self._pending[older_id]
        return TriggerCheckpoint(barrier)
