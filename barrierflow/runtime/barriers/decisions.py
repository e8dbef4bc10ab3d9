"""What a barrier handler tells its task to do: trigger a checkpoint, or abort one.

A barrier handler (`CheckpointBarrierAligner`, `CheckpointBarrierTracker`) takes one
channel event per call and answers with a tuple of decisions, oldest checkpoint first.
Most calls answer `NOTHING`; most others answer one decision; a few answer two, such as
"abort checkpoint 1 (subsumed), then trigger checkpoint 2". The task carries them out in
order:

- `TriggerCheckpoint(barrier)`: snapshot the operators now, then forward the barrier
  downstream (Flink's `notifyCheckpoint`).
- `AbortCheckpoint(checkpoint_id, reason)`: decline the checkpoint to the coordinator and
  send a `CancelCheckpointMarker` downstream (Flink's `notifyAbort`).

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

__all__ = ["NOTHING", "AbortCheckpoint", "Decision", "TriggerCheckpoint"]


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


Decision: TypeAlias = TriggerCheckpoint | AbortCheckpoint
"""One instruction from a barrier handler to its task."""

NOTHING: tuple[Decision, ...] = ()
"""The answer of a handler call that changes nothing the task must act on."""
