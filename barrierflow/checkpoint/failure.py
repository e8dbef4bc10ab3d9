"""Why a checkpoint failed: one enum shared by the handlers, tasks and the coordinator."""

from __future__ import annotations

import enum


class CheckpointFailureReason(enum.Enum):
    """The reason a checkpoint was aborted; `counts_as_failure` feeds tolerable failures."""

    CHECKPOINT_SUBSUMED = "a newer checkpoint completed or started first"
    CHECKPOINT_EXPIRED = "the checkpoint timed out before all tasks acknowledged"
    CHECKPOINT_DECLINED = "a task declined the checkpoint"
    CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER = "an upstream task cancelled the checkpoint"
    CHECKPOINT_DECLINED_INPUT_END_OF_STREAM = "an input ended before delivering the barrier"
    CHECKPOINT_DECLINED_TASK_NOT_READY = "a task was not running when triggered"
    CHECKPOINT_ASYNC_EXCEPTION = "writing a task's state failed"
    FINALIZE_CHECKPOINT_FAILURE = "writing the checkpoint metadata failed"
    JOB_FAILOVER_REGION = "the job failed over while the checkpoint was pending"
    TOO_MANY_CONCURRENT_CHECKPOINTS = "max concurrent checkpoints reached"
    MINIMUM_TIME_BETWEEN_CHECKPOINTS = "min pause between checkpoints not yet over"

    @property
    def counts_as_failure(self) -> bool:
        """Whether this abort counts towards the tolerable-failure limit (as in Flink)."""
        return self in _COUNTED


_COUNTED = frozenset(
    {
        CheckpointFailureReason.CHECKPOINT_EXPIRED,
        CheckpointFailureReason.CHECKPOINT_DECLINED,
        CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION,
        CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE,
    }
)
