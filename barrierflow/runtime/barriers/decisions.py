"""What a barrier handler tells its task to do: trigger a checkpoint, or abort one.

A barrier handler (`CheckpointBarrierAligner`, `CheckpointBarrierTracker`,
`CheckpointBarrierUnaligner`) takes one channel event per call and answers with a tuple of
decisions, oldest checkpoint first.
Most calls answer `NOTHING`; most others answer one decision; a few answer two, such as
"abort checkpoint 1 (subsumed), then trigger checkpoint 2". The task carries them out in
order:

- `TriggerCheckpoint(barrier)`: snapshot the operators now, then forward the barrier
  downstream (Flink's `notifyCheckpoint`).
- `AbortCheckpoint(checkpoint_id, reason)`: decline the checkpoint to the coordinator and
  send a `CancelCheckpointMarker` downstream (Flink's `notifyAbort`); after a
  `TriggerUnaligned`, also drop the checkpoint's channel state.

Unaligned checkpoints (`CheckpointBarrierUnaligner` only) add four:

- `TriggerUnaligned(barrier, channels)`: snapshot the operators now, send the barrier
  downstream ahead of every queued output buffer (persisting the buffers it overtakes as
  output channel state), and start persisting the in-flight input of `channels`.
- `StopPersisting(channel, checkpoint_id)`: the channel's barrier arrived; what it delivered
  before the barrier is all in the channel state.
- `ChannelStateComplete(checkpoint_id)`: every input channel's barrier arrived (or the
  channel ended): the channel state is complete; write it and acknowledge.
- `ArmAlignmentTimer(checkpoint_id, delay_ms)`: call `on_alignment_timeout(checkpoint_id)`
  after `delay_ms`, through the mailbox (aligned checkpoints with a timeout).

Decisions are plain frozen values, so tests compare them with `==`:

>>> from barrierflow.runtime.elements import CheckpointBarrier
>>> TriggerCheckpoint(CheckpointBarrier(3, timestamp=0)).checkpoint_id
3
>>> AbortCheckpoint.subsumed(2) == AbortCheckpoint(2, CheckpointFailureReason.CHECKPOINT_SUBSUMED)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.runtime.elements import CheckpointBarrier

__all__ = [
    "NOTHING",
    "AbortCheckpoint",
    "ArmAlignmentTimer",
    "ChannelStateComplete",
    "Decision",
    "StopPersisting",
    "TriggerCheckpoint",
    "TriggerUnaligned",
]


@dataclass(frozen=True, slots=True)
class TriggerCheckpoint:
    """Snapshot now and forward `barrier`: it arrived on every channel the handler waits for."""

    barrier: CheckpointBarrier
    """The barrier to forward; it carries the checkpoint id and the trigger timestamp."""

    @property
    def checkpoint_id(self) -> int:
        """The id of the checkpoint to take."""
        return self.barrier.checkpoint_id


@dataclass(frozen=True, slots=True)
class AbortCheckpoint:
    """Decline checkpoint `checkpoint_id` and tell the tasks downstream to stop waiting for it.

    Use the named constructors, one per reason a barrier handler aborts:

    >>> AbortCheckpoint.on_cancellation_barrier(4).reason.name
    'CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER'
    """

    checkpoint_id: int
    """The checkpoint this task will not take."""
    reason: CheckpointFailureReason
    """Why; the coordinator reports it and decides whether it counts as a failure."""

    @classmethod
    def subsumed(cls, checkpoint_id: int) -> AbortCheckpoint:
        """A newer checkpoint's barrier or cancellation marker overtook this checkpoint."""
        return cls(checkpoint_id, CheckpointFailureReason.CHECKPOINT_SUBSUMED)

    @classmethod
    def on_cancellation_barrier(cls, checkpoint_id: int) -> AbortCheckpoint:
        """An upstream task cancelled this checkpoint (a `CancelCheckpointMarker` arrived)."""
        return cls(
            checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER
        )

    @classmethod
    def input_ended(cls, checkpoint_id: int) -> AbortCheckpoint:
        """Every input ended before the barrier arrived on all of them."""
        return cls(checkpoint_id, CheckpointFailureReason.CHECKPOINT_DECLINED_INPUT_END_OF_STREAM)


@dataclass(frozen=True, slots=True)
class TriggerUnaligned:
    """Snapshot now, forward `barrier` ahead of queued output, persist the in-flight input.

    The task carries it out in this order, before it polls any further input:

    1. snapshot the operators (their state reflects exactly the input polled so far);
    2. flush the partly filled output buffers, then send the barrier on every output channel
       ahead of the frames queued there (`OutputChannel.send_priority_event`) and add the
       frames it overtook to the checkpoint's output channel state;
    3. for every channel in `channels`, add the data queued in the input gate up to the
       channel's barrier of this checkpoint (`channel_state.in_flight_input`) to the input
       channel state, then keep adding what arrives on it while `is_persisting(channel)`.

    Input channels left out of `channels` delivered this barrier in-band before the switch
    (an alignment that timed out), so what they hold comes after the barrier; ended channels
    hold nothing.
    """

    barrier: CheckpointBarrier
    """The first barrier of the checkpoint, to forward; it carries the id and trigger time."""
    channels: frozenset[int]
    """The input channels whose queued data, up to their barrier, belongs to the checkpoint."""

    @property
    def checkpoint_id(self) -> int:
        """The id of the checkpoint to take."""
        return self.barrier.checkpoint_id


@dataclass(frozen=True, slots=True)
class StopPersisting:
    """Stop adding what arrives on `channel` to the channel state of `checkpoint_id`.

    The channel's barrier of that checkpoint arrived, or the channel ended: everything the
    channel delivered before it is in the channel state (queued data at the trigger, arrivals
    since), and everything after it is the next checkpoint's business.
    """

    channel: int
    """The input channel that delivered its barrier."""
    checkpoint_id: int
    """The unaligned checkpoint being persisted."""


@dataclass(frozen=True, slots=True)
class ChannelStateComplete:
    """The input channel state of `checkpoint_id` is complete: finish it and acknowledge.

    Every open input channel delivered the barrier (or ended), so no channel is persisting any
    more. The task finishes the channel state (`ChannelStateWriter.finish`) and acknowledges
    the checkpoint once the snapshot taken at `TriggerUnaligned` and the channel state are
    both written.
    """

    checkpoint_id: int
    """The unaligned checkpoint whose in-flight data is all recorded."""


@dataclass(frozen=True, slots=True)
class ArmAlignmentTimer:
    """Call `on_alignment_timeout(checkpoint_id)` after `delay_ms`, through the mailbox.

    Answered when the alignment of a checkpoint that may switch to unaligned starts. The task
    never needs to cancel the timer: a timeout that fires after the alignment completed, was
    aborted or already switched decides nothing.
    """

    checkpoint_id: int
    """The checkpoint whose alignment may time out."""
    delay_ms: int
    """Milliseconds from now, at least 1 (an alignment already past its timeout switches at
    once instead)."""


Decision: TypeAlias = (
    TriggerCheckpoint
    | AbortCheckpoint
    | TriggerUnaligned
    | StopPersisting
    | ChannelStateComplete
    | ArmAlignmentTimer
)
"""One instruction from a barrier handler to its task."""

NOTHING: tuple[Decision, ...] = ()
"""The answer of a handler call that changes nothing the task must act on."""
