"""One triggered checkpoint on its way to completion or abort (Flink's `PendingCheckpoint`)."""

from __future__ import annotations

import enum
from typing import Any

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.errors import IllegalCheckpointTransitionError


class AcknowledgeResult(enum.Enum):
    """What became of one task's acknowledgement (Flink's `TaskAcknowledgeResult`)."""

    SUCCESS = "the acknowledgement was recorded"
    DUPLICATE = "the task had already acknowledged this checkpoint"
    UNKNOWN = "the checkpoint or the task is not one this coordinator waits for"
    DISCARDED = "the checkpoint was aborted: the task's state must be deleted"


class PendingCheckpointStatus(enum.Enum):
    """Where a pending checkpoint is; COMPLETED and ABORTED are final."""

    PENDING = "triggered; waiting for every task's acknowledgement"
    FINALIZING = "every task acknowledged; the JobMaster is writing `_metadata`"
    COMPLETED = "`_metadata` is written; the checkpoint can be restored"
    ABORTED = "declined, expired, subsumed, failed to finalize or dropped on failover"


class PendingCheckpoint:
    """Collects the acknowledgements of one checkpoint. Mailbox thread only.

    Guarantees that a checkpoint completes at most once, only after every task in
    `tasks_to_ack` acknowledged, and that a completed checkpoint is never aborted
    (and an aborted one never completed): every other move raises
    `IllegalCheckpointTransitionError`. Assumes the coordinator only finalizes a
    fully acknowledged checkpoint and never expires or declines one it is finalizing.

    >>> checkpoint = PendingCheckpoint(7, 1_000, frozenset({0, 1}))
    >>> checkpoint.acknowledge_task(0, "state-0").name, checkpoint.acknowledge_task(0, "x").name
    ('SUCCESS', 'DUPLICATE')
    >>> checkpoint.acknowledge_task(1, "state-1").name, checkpoint.is_fully_acknowledged
    ('SUCCESS', True)
    >>> checkpoint.start_finalizing()
    {0: 'state-0', 1: 'state-1'}
    >>> checkpoint.abort_expired()
    Traceback (most recent call last):
      ...
    barrierflow.errors.IllegalCheckpointTransitionError: checkpoint 7 \
cannot be aborted as expired while FINALIZING
    """

    def __init__(
        self,
        checkpoint_id: int,
        timestamp_ms: int,
        tasks_to_ack: frozenset[int],
        *,
        is_final: bool = False,
        is_savepoint: bool = False,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.timestamp_ms = timestamp_ms
        """When the checkpoint was triggered, in the coordinator's milliseconds."""
        self.is_final = is_final
        self.is_savepoint = is_savepoint
        self._not_yet_acknowledged = set(tasks_to_ack)
        self._task_states: dict[int, Any] = {}
        self._status = PendingCheckpointStatus.PENDING
        self.failure_reason: CheckpointFailureReason | None = None
        """Why it was aborted; None unless ABORTED."""

    @property
    def status(self) -> PendingCheckpointStatus:
        return self._status

    @property
    def is_fully_acknowledged(self) -> bool:
        return not self._not_yet_acknowledged

    def acknowledge_task(self, task: int, state_handle: Any) -> AcknowledgeResult:
        """Record one task's state; the result says whether it counted."""
        if self._status is PendingCheckpointStatus.ABORTED:
            return AcknowledgeResult.DISCARDED
        if task in self._task_states:
            return AcknowledgeResult.DUPLICATE
        if self._status is not PendingCheckpointStatus.PENDING:
            return AcknowledgeResult.UNKNOWN
        if task not in self._not_yet_acknowledged:
            return AcknowledgeResult.UNKNOWN
        self._not_yet_acknowledged.remove(task)
        self._task_states[task] = state_handle
        return AcknowledgeResult.SUCCESS

    def start_finalizing(self) -> dict[int, Any]:
        """PENDING -> FINALIZING once every task acknowledged; returns the task states."""
        self._require(
            "finalized",
            self._status is PendingCheckpointStatus.PENDING and self.is_fully_acknowledged,
        )
        self._status = PendingCheckpointStatus.FINALIZING
        return dict(self._task_states)

    def complete(self) -> None:
        """FINALIZING -> COMPLETED: the JobMaster wrote `_metadata`."""
        self._require("completed", self._status is PendingCheckpointStatus.FINALIZING)
        self._status = PendingCheckpointStatus.COMPLETED

    # ---- aborts, one per reason (only PENDING ones expire or are declined) -------------------

    def abort_expired(self) -> CheckpointFailureReason:
        """The timeout passed before every task acknowledged."""
        return self._abort(
            "aborted as expired", CheckpointFailureReason.CHECKPOINT_EXPIRED, finalizing=False
        )

    def abort_declined(self, reason: CheckpointFailureReason) -> CheckpointFailureReason:
        """A task declined, with its own reason (declined, async exception, not ready...)."""
        return self._abort("aborted as declined", reason, finalizing=False)

    def abort_subsumed(self) -> CheckpointFailureReason:
        """A newer checkpoint completed first; savepoints are never subsumed."""
        if self.is_savepoint:
            raise IllegalCheckpointTransitionError(
                f"savepoint {self.checkpoint_id} cannot be subsumed: savepoints never are"
            )
        return self._abort("subsumed", CheckpointFailureReason.CHECKPOINT_SUBSUMED, finalizing=True)

    def abort_finalize_failed(self) -> CheckpointFailureReason:
        """Writing `_metadata` failed."""
        self._require(
            "aborted as unfinalizable", self._status is PendingCheckpointStatus.FINALIZING
        )
        return self._abort(
            "aborted as unfinalizable",
            CheckpointFailureReason.FINALIZE_CHECKPOINT_FAILURE,
            finalizing=True,
        )

    def abort_on_failover(self) -> CheckpointFailureReason:
        """The job failed over: this attempt's tasks will never acknowledge."""
        return self._abort(
            "aborted on failover", CheckpointFailureReason.JOB_FAILOVER_REGION, finalizing=True
        )

    def _abort(
        self, what: str, reason: CheckpointFailureReason, *, finalizing: bool
    ) -> CheckpointFailureReason:
        allowed = {PendingCheckpointStatus.PENDING}
        if finalizing:
            allowed.add(PendingCheckpointStatus.FINALIZING)
        self._require(what, self._status in allowed)
        self._status = PendingCheckpointStatus.ABORTED
        self.failure_reason = reason
        self._task_states.clear()
        return reason

    def _require(self, what: str, allowed: bool) -> None:
        if not allowed:
            kind = "savepoint" if self.is_savepoint else "checkpoint"
            raise IllegalCheckpointTransitionError(
                f"{kind} {self.checkpoint_id} cannot be {what} while {self._status.name}"
            )

    def __repr__(self) -> str:
        kind = "savepoint" if self.is_savepoint else "final" if self.is_final else "checkpoint"
        return f"PendingCheckpoint({self.checkpoint_id}, {kind}, {self._status.name})"
