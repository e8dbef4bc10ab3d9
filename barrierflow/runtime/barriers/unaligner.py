"""CheckpointBarrierUnaligner: unaligned checkpoints, and aligned ones that time out into them.

Flink's `SingleCheckpointBarrierHandler.unaligned` and `.alternating` as one pure object, built
with the named constructors `CheckpointBarrierUnaligner.unaligned(channel_count)` (every
checkpoint unaligned from its first barrier) and
`CheckpointBarrierUnaligner.alternating(channel_count, aligned_timeout_ms)` (aligned first,
unaligned once the alignment has taken `aligned_timeout_ms`). Savepoints and final checkpoints
(`CheckpointBarrier.must_align`) are aligned in both.

Every barrier reaches the handler twice, as in Flink, where a barrier is announced ahead of the
buffers queued in front of it:

- `on_barrier_announced(channel, barrier)` the moment its frame arrives at the input gate,
  before the task polls what was queued ahead of it. An unaligned checkpoint starts here, and
  here a channel's in-flight data ends: what arrived before the barrier belongs to the
  checkpoint, what arrives after it does not.
- `on_barrier(channel, barrier)` when the task polls it, in channel order. Only an alignment
  (a savepoint, or a checkpoint whose alignment has not timed out) waits for this one.

Cancellation markers and ends of partition reach it once, when polled. A checkpoint n is, from
its first announced barrier until it triggers, completes or aborts, in one of two phases
(`Phase`): ALIGNING (channels that polled the barrier are blocked, no snapshot yet) or
UNALIGNED (the snapshot is taken; channels whose barrier has not arrived are persisting).

=================================  =============================================================
event                              decision
=================================  =============================================================
barrier n announced, n newer than  abort the current checkpoint (subsumed); unaligned and not a
all seen                           savepoint: trigger unaligned n over every open channel and
                                   stop persisting this one; otherwise start aligning n and,
                                   unless a savepoint, arm the alignment timer, or switch at
                                   once when `now_ms` shows the barrier older than the timeout
barrier n announced, n UNALIGNED   stop persisting the channel; complete n when none persists
barrier n announced, n ALIGNING    nothing (its barrier is queued), unless `now_ms` shows the
                                   timeout passed: switch
barrier n polled, n ALIGNING       block the channel; when every open channel is blocked,
                                   trigger n (aligned) and unblock every channel
barrier announced or polled,       nothing: a late barrier of a completed, cancelled or
otherwise                          subsumed checkpoint, or the in-band copy of one announced
alignment timeout n, n ALIGNING    switch: unblock every channel, trigger unaligned n over the
and not a savepoint                open channels that were not blocked, stop persisting those
                                   whose barrier is already queued, complete n if none persists
alignment timeout, otherwise       nothing: the alignment completed, aborted or switched first
cancel marker n                    as the aligner: abort n (cancellation barrier) if current or
                                   newer than all seen, the current one first (subsumed)
end of partition                   stop waiting for the channel; ALIGNING: trigger n if every
                                   open channel is blocked, abort n (input ended) if none is
                                   open; UNALIGNED: stop persisting it, complete n if none does
=================================  =============================================================

A stream that breaks channel order raises `StreamCorruptionError`: a barrier announced on a
channel that is not newer than the previous one announced there, a barrier polled that is not
the oldest announced and not yet polled on its channel, and any event after a channel's end of
partition (so an end of partition polled while a barrier is still queued before it).

Where it differs from Flink, deliberately: cancellation markers travel in-band (Flink sends them
as priority events when checkpoints are unaligned), so a cancelled unaligned checkpoint keeps
persisting the cancelling channel until its marker is polled, and the abort drops all of it.
A barrier an upstream task sent unaligned does not switch an alignment at once (Flink reads that
from the barrier's options); it is older than the timeout by then, which `now_ms` detects.
"""

from __future__ import annotations

import enum
from collections import deque

from barrierflow.errors import StreamCorruptionError
from barrierflow.runtime.barriers.decisions import (
    NOTHING,
    AbortCheckpoint,
    ArmAlignmentTimer,
    ChannelStateComplete,
    Decision,
    StopPersisting,
    TriggerCheckpoint,
    TriggerUnaligned,
)
from barrierflow.runtime.barriers.ledger import ChannelLedger
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier

__all__ = ["CheckpointBarrierUnaligner", "Phase"]


class Phase(enum.Enum):
    """Where the checkpoint a `CheckpointBarrierUnaligner` is working on stands."""

    ALIGNING = "aligning"
    """No snapshot yet: the channels that polled the barrier are blocked until all did."""
    UNALIGNED = "unaligned"
    """Snapshot taken: the channels whose barrier has not arrived are persisting their data."""


def _is_savepoint(barrier: CheckpointBarrier) -> bool:
    # Final checkpoints align like savepoints: when they complete the tasks finish, so no
    # data may be left in flight (in channel state) behind them.
    return barrier.must_align


class _Pending:
    """The checkpoint the handler works on: its first barrier and where its channels stand."""

    __slots__ = ("arrived", "barrier", "blocked", "is_savepoint", "phase")

    def __init__(self, barrier: CheckpointBarrier) -> None:
        self.barrier = barrier
        """The first barrier to arrive; the one a trigger forwards."""
        self.is_savepoint = _is_savepoint(barrier)
        """Savepoints and final checkpoints stay aligned: they never arm a timer nor switch."""
        self.phase = Phase.ALIGNING
        self.arrived: set[int] = set()
        """Open channels whose barrier arrived (was announced)."""
        self.blocked: set[int] = set()
        """Open channels whose barrier was polled while aligning; a subset of `arrived`."""

    @property
    def checkpoint_id(self) -> int:
        return self.barrier.checkpoint_id


class CheckpointBarrierUnaligner:
    """Exactly-once unaligned checkpoints, optionally aligned first; mailbox thread only.

    Exactly-once: the snapshot is taken at the first barrier (or when an alignment times out),
    and every input channel's data that arrived before its own barrier but was not yet polled is
    persisted with it (the channel state), so the snapshot plus the channel state reflect every
    record before the barrier exactly once, and nothing after it. Assumes checkpoint ids
    increase on every channel, that the task announces every barrier the moment its frame
    arrives and polls it later in channel order, and that it never polls a blocked channel.

    Owns no clock, socket or thread; each event method returns a tuple of decisions. Time comes
    in as events: `on_alignment_timeout` when an armed timer fires, and an optional `now_ms`.

    >>> from barrierflow.runtime.elements import CheckpointBarrier
    >>> handler = CheckpointBarrierUnaligner.unaligned(2)
    >>> barrier = CheckpointBarrier(1, timestamp=5)
    >>> [type(decision).__name__ for decision in handler.on_barrier_announced(0, barrier)]
    ['TriggerUnaligned', 'StopPersisting']
    >>> handler.persisting_channels
    frozenset({1})
    >>> handler.on_barrier_announced(1, barrier)
    (StopPersisting(channel=1, checkpoint_id=1), ChannelStateComplete(checkpoint_id=1))
    >>> handler.on_barrier(0, barrier), handler.on_barrier(1, barrier)
    ((), ())
    """

    __slots__ = ("_channel_count", "_ledger", "_pending", "_timeout_ms", "_unpolled")

    def __init__(self, channel_count: int, *, aligned_timeout_ms: int) -> None:
        """Use `unaligned` or `alternating`; `aligned_timeout_ms` 0 means unaligned at once."""
        self._ledger = ChannelLedger(channel_count, "an unaligner")
        """Open channels, each channel's last announced barrier, the newest id seen."""
        if isinstance(aligned_timeout_ms, bool) or not isinstance(aligned_timeout_ms, int):
            raise TypeError(
                f"the aligned timeout is whole milliseconds, not {aligned_timeout_ms!r}"
            )
        if aligned_timeout_ms < 0:
            raise ValueError(f"the aligned timeout cannot be negative: {aligned_timeout_ms} ms")
        self._channel_count = channel_count
        self._timeout_ms = aligned_timeout_ms
        self._unpolled: list[deque[int]] = [deque() for _ in range(channel_count)]
        """Per channel, the ids of the barriers announced and not yet polled, oldest first."""
        self._pending: _Pending | None = None
        """The checkpoint being aligned or persisted; None between checkpoints."""

    @classmethod
    def unaligned(cls, channel_count: int) -> CheckpointBarrierUnaligner:
        """Every checkpoint unaligned from its first barrier; savepoints aligned."""
        return cls(channel_count, aligned_timeout_ms=0)

    @classmethod
    def alternating(cls, channel_count: int, aligned_timeout_ms: int) -> CheckpointBarrierUnaligner:
        """Checkpoints aligned first, unaligned once aligning took `aligned_timeout_ms` (>= 1);
        savepoints aligned."""
        handler = cls(channel_count, aligned_timeout_ms=aligned_timeout_ms)
        if handler.aligned_timeout_ms == 0:
            raise ValueError(
                "an alternating handler needs an aligned timeout of at least 1 ms; "
                "CheckpointBarrierUnaligner.unaligned is the one without alignment"
            )
        return handler

    # ---- read-only views ---------------------------------------------------------------------

    @property
    def aligned_timeout_ms(self) -> int:
        """How long a checkpoint aligns before it switches to unaligned; 0: it never aligns."""
        return self._timeout_ms

    def is_blocked(self, channel: int) -> bool:
        """Whether the task must not poll `channel` now (it delivered the barrier being aligned)."""
        pending = self._pending
        return pending is not None and channel in pending.blocked

    def is_persisting(self, channel: int) -> bool:
        """Whether what arrives on `channel` now belongs to the current channel state."""
        pending = self._pending
        return (
            pending is not None
            and pending.phase is Phase.UNALIGNED
            and self._ledger.is_open(channel)
            and channel not in pending.arrived
        )

    @property
    def blocked_channels(self) -> frozenset[int]:
        """The channels the task must not poll now."""
        return frozenset(() if self._pending is None else self._pending.blocked)

    @property
    def persisting_channels(self) -> frozenset[int]:
        """The channels whose arriving data belongs to the current checkpoint's channel state."""
        return frozenset(c for c in range(self._channel_count) if self.is_persisting(c))

    @property
    def current_checkpoint_id(self) -> int | None:
        """The checkpoint being aligned or persisted, or None."""
        return None if self._pending is None else self._pending.checkpoint_id

    @property
    def current_phase(self) -> Phase | None:
        """Whether the current checkpoint is aligning or persisting, or None between them."""
        return None if self._pending is None else self._pending.phase

    @property
    def latest_checkpoint_id(self) -> int | None:
        """The newest checkpoint id seen in any barrier or cancellation marker, or None."""
        return self._ledger.latest_checkpoint_id

    @property
    def open_channel_count(self) -> int:
        """How many channels have not delivered their end of partition."""
        return self._ledger.open_channel_count

    # ---- events ------------------------------------------------------------------------------

    def on_barrier_announced(
        self, channel: int, barrier: CheckpointBarrier, now_ms: int | None = None
    ) -> tuple[Decision, ...]:
        """The frame of `barrier` arrived on `channel`; the task will poll it later, in order.

        `now_ms` (wall clock, epoch milliseconds, like the barrier's timestamp) lets an
        alternating handler switch at once when the checkpoint was triggered longer ago than the
        aligned timeout, as Flink does; without it the timeout counts from this task's first
        barrier. Clock skew between machines only moves the switch earlier or later.
        """
        checkpoint_id = barrier.checkpoint_id
        newest = self._ledger.barrier(channel, checkpoint_id)
        self._unpolled[channel].append(checkpoint_id)
        if newest:
            subsumed = self._abort_current_as_subsumed()
            return subsumed + self._start(channel, barrier, now_ms)
        pending = self._pending
        if pending is None or pending.checkpoint_id != checkpoint_id:
            return NOTHING
        pending.arrived.add(channel)
        if pending.phase is Phase.UNALIGNED:
            return (StopPersisting(channel, checkpoint_id), *self._complete_if_collected())
        return self._switch_if_overdue(now_ms)

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> tuple[Decision, ...]:
        """The task polled `barrier` from `channel`: every element queued before it is processed."""
        self._ledger.check_open(channel, f"the barrier of checkpoint {barrier.checkpoint_id}")
        checkpoint_id = barrier.checkpoint_id
        unpolled = self._unpolled[channel]
        if not unpolled or unpolled[0] != checkpoint_id:
            raise StreamCorruptionError(
                f"channel {channel} delivered the barrier of checkpoint {checkpoint_id} in-band "
                + (
                    f"while the barrier of checkpoint {unpolled[0]} arrived before it"
                    if unpolled
                    else "before it arrived (announce every barrier when its frame arrives)"
                )
            )
        unpolled.popleft()
        pending = self._pending
        if (
            pending is None
            or pending.checkpoint_id != checkpoint_id
            or pending.phase is not Phase.ALIGNING
        ):
            return NOTHING
        pending.blocked.add(channel)
        return self._trigger_if_aligned()

    def on_alignment_timeout(self, checkpoint_id: int) -> tuple[Decision, ...]:
        """The timer of an `ArmAlignmentTimer(checkpoint_id, ...)` fired."""
        pending = self._pending
        if (
            pending is None
            or pending.checkpoint_id != checkpoint_id
            or pending.phase is not Phase.ALIGNING
            or pending.is_savepoint
        ):
            return NOTHING
        return self._switch()

    def on_cancel_marker(
        self, channel: int, marker: CancelCheckpointMarker
    ) -> tuple[Decision, ...]:
        """The task polled `marker` from `channel`: an upstream task aborted that checkpoint."""
        checkpoint_id = marker.checkpoint_id
        if self._ledger.cancel_marker(channel, checkpoint_id):  # newer than every id seen
            subsumed = self._abort_current_as_subsumed()
            return (*subsumed, AbortCheckpoint.on_cancellation_barrier(checkpoint_id))
        if self._pending is not None and checkpoint_id == self._pending.checkpoint_id:
            self._pending = None
            return (AbortCheckpoint.on_cancellation_barrier(checkpoint_id),)
        return NOTHING

    def on_end_of_partition(self, channel: int) -> tuple[Decision, ...]:
        """The task polled the end of `channel`: nothing more comes on it."""
        self._ledger.check_open(channel, "a second end of partition")
        if self._unpolled[channel]:
            raise StreamCorruptionError(
                f"channel {channel} ended before the barrier of checkpoint "
                f"{self._unpolled[channel][0]} that arrived on it was polled"
            )
        was_persisting = self.is_persisting(channel)
        self._ledger.end(channel)
        pending = self._pending
        if pending is None:
            return NOTHING
        pending.arrived.discard(channel)
        pending.blocked.discard(channel)  # only if the task polled a blocked channel
        if pending.phase is Phase.UNALIGNED:
            stop = (StopPersisting(channel, pending.checkpoint_id),) if was_persisting else NOTHING
            return stop + self._complete_if_collected()
        if self._ledger.open_channel_count == 0:
            self._pending = None
            return (AbortCheckpoint.input_ended(pending.checkpoint_id),)
        return self._trigger_if_aligned()

    # ---- internals ---------------------------------------------------------------------------

    def _start(
        self, channel: int, barrier: CheckpointBarrier, now_ms: int | None
    ) -> tuple[Decision, ...]:
        pending = self._pending = _Pending(barrier)
        pending.arrived.add(channel)
        if pending.is_savepoint:
            return NOTHING
        if self._timeout_ms == 0:
            return self._switch()
        remaining = self._remaining_ms(now_ms)
        if remaining <= 0:
            return self._switch()
        return (ArmAlignmentTimer(barrier.checkpoint_id, remaining),)

    def _remaining_ms(self, now_ms: int | None) -> int:
        """Milliseconds the current alignment may still take (<= 0: it is overdue)."""
        if now_ms is None:
            return self._timeout_ms
        assert self._pending is not None
        in_flight = now_ms - self._pending.barrier.timestamp
        # A clock behind the coordinator's (negative time in flight) gets the plain timeout.
        return min(self._timeout_ms, self._timeout_ms - in_flight)

    def _switch_if_overdue(self, now_ms: int | None) -> tuple[Decision, ...]:
        pending = self._pending
        assert pending is not None and pending.phase is Phase.ALIGNING
        if pending.is_savepoint or now_ms is None or self._timeout_ms == 0:
            return NOTHING
        return self._switch() if self._remaining_ms(now_ms) <= 0 else NOTHING

    def _switch(self) -> tuple[Decision, ...]:
        """Take the current checkpoint unaligned now (at its first barrier, or on timeout)."""
        pending = self._pending
        assert pending is not None and pending.phase is Phase.ALIGNING
        checkpoint_id = pending.checkpoint_id
        channels = frozenset(c for c in self._ledger.open_channels if c not in pending.blocked)
        pending.phase = Phase.UNALIGNED
        pending.blocked.clear()
        return (
            TriggerUnaligned(pending.barrier, channels),
            *(StopPersisting(c, checkpoint_id) for c in sorted(channels & pending.arrived)),
            *self._complete_if_collected(),
        )

    def _complete_if_collected(self) -> tuple[Decision, ...]:
        pending = self._pending
        assert pending is not None and pending.phase is Phase.UNALIGNED
        # Arrived channels are always open, so equal counts mean every open channel arrived.
        if not self._ledger.all_open(pending.arrived):
            return NOTHING
        self._pending = None
        return (ChannelStateComplete(pending.checkpoint_id),)

    def _trigger_if_aligned(self) -> tuple[Decision, ...]:
        pending = self._pending
        assert pending is not None and pending.phase is Phase.ALIGNING
        if not self._ledger.all_open(pending.blocked):
            return NOTHING
        self._pending = None
        return (TriggerCheckpoint(pending.barrier),)

    def _abort_current_as_subsumed(self) -> tuple[Decision, ...]:
        if self._pending is None:
            return NOTHING
        checkpoint_id = self._pending.checkpoint_id
        self._pending = None
        return (AbortCheckpoint.subsumed(checkpoint_id),)
