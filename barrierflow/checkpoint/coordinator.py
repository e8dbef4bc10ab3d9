"""The CheckpointCoordinator: triggers checkpoints, collects acknowledgements, completes or
aborts them, and decides when the job must fail because too many failed in a row.

It is a pure state machine over the JobMaster's mails: every event method takes the
time as `now_ms` and returns the actions the JobMaster carries out, in order. It owns
no clock, thread, socket or file. Flink's `CheckpointCoordinator`, with its
`CheckpointRequestDecider` (request_decider.py), `PendingCheckpoint`
(pending_checkpoint.py) and `CheckpointFailureManager` (below).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.pending_checkpoint import (
    AcknowledgeResult,
    PendingCheckpoint,
    PendingCheckpointStatus,
)
from barrierflow.checkpoint.request_decider import CheckpointRequestDecider, TriggerRequest
from barrierflow.errors import (
    CheckpointCoordinatorStateError,
    ConfigurationError,
    IllegalCheckpointTransitionError,
)

__all__ = [
    "AcknowledgeResult",
    "CheckpointCoordinator",
    "CheckpointCoordinatorConfig",
    "CheckpointCoordinatorStateError",
    "CheckpointFailureManager",
    "CoordinatorAction",
    "CoordinatorStatus",
    "DiscardState",
    "FailJob",
    "FinalizeCheckpoint",
    "IllegalCheckpointTransitionError",
    "NotifyCheckpointAborted",
    "NotifyCheckpointComplete",
    "TriggerCheckpoint",
]


@dataclass(frozen=True)
class CheckpointCoordinatorConfig:
    """Flink's checkpointing settings, in milliseconds."""

    interval_ms: int
    min_pause_ms: int = 0
    timeout_ms: int = 600_000
    max_concurrent: int = 1
    tolerable_failures: int = 0

    def __post_init__(self) -> None:
        for name, minimum in (
            ("interval_ms", 1),
            ("min_pause_ms", 0),
            ("timeout_ms", 1),
            ("max_concurrent", 1),
            ("tolerable_failures", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigurationError(f"{name} must be an integer >= {minimum}, got {value!r}")


# ---- actions: what the JobMaster must do, in the order given ---------------------------------


@dataclass(frozen=True)
class TriggerCheckpoint:
    """Send checkpoint `checkpoint_id`'s trigger to the source tasks."""

    checkpoint_id: int
    timestamp_ms: int
    is_final: bool
    is_savepoint: bool = False


@dataclass(frozen=True)
class FinalizeCheckpoint:
    """Every task acknowledged: write `_metadata`, then call `on_checkpoint_finalized`
    (or `on_finalize_failed`). `timestamp_ms` is the trigger time."""

    checkpoint_id: int
    timestamp_ms: int
    is_final: bool
    task_states: dict[int, Any]
    is_savepoint: bool = False


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    """Tell every task the checkpoint completed (two-phase-commit sinks commit)."""

    checkpoint_id: int
    is_final: bool
    is_savepoint: bool = False


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    """Tell every task the checkpoint was aborted."""

    checkpoint_id: int
    reason: CheckpointFailureReason


@dataclass(frozen=True)
class DiscardState:
    """Delete the checkpoint's folder: it did not and never will complete."""

    checkpoint_id: int


@dataclass(frozen=True)
class FailJob:
    """Fail the attempt: too many checkpoints failed in a row, or the final savepoint of a
    stop with savepoint failed after the sources stopped. Always the last action."""

    reason: str


CoordinatorAction = (
    TriggerCheckpoint
    | FinalizeCheckpoint
    | NotifyCheckpointComplete
    | NotifyCheckpointAborted
    | DiscardState
    | FailJob
)
"""One thing the coordinator asks the JobMaster to do."""


class CoordinatorStatus(enum.Enum):
    """The coordinator's life; only RUNNING and FINISHING trigger anything."""

    CREATED = "built; start() not called yet, nothing triggers"
    RUNNING = "periodic checkpoints trigger every interval"
    FINISHING = "every bounded input ended: only the final checkpoint and savepoints trigger"
    FINISHED = "the final checkpoint completed: nothing triggers any more"
    FAILING = "too many checkpoints failed: FailJob was emitted, nothing triggers any more"
    STOPPED = "the attempt failed over: every pending checkpoint was aborted"


class CheckpointFailureManager:
    """Counts consecutive checkpoint failures and says when the job must fail. Mailbox thread.

    Guarantees the job fails on the first counted failure past `tolerable_failures`
    in a row; assumes only checkpoints (not savepoints) are reported, as a failed
    savepoint is the user's to retry and must not fail the job.
    """

    def __init__(self, tolerable_failures: int) -> None:
        self.tolerable_failures = tolerable_failures
        self.consecutive_failures = 0

    def handle_success(self) -> None:
        self.consecutive_failures = 0

    def handle_failure(
        self, checkpoint_id: int, reason: CheckpointFailureReason, detail: str = ""
    ) -> str | None:
        """Count a failure whose reason counts; return why the job must fail, or None."""
        if not reason.counts_as_failure:
            return None
        self.consecutive_failures += 1
        if self.consecutive_failures <= self.tolerable_failures:
            return None
        return (
            f"exceeded the tolerable checkpoint failure number ({self.tolerable_failures}): "
            f"checkpoint {checkpoint_id} failed: {reason.value}{detail}"
        )


class CheckpointCoordinator:
    """Flink's checkpoint coordinator as a pure state machine. Mailbox thread only.

    Guarantees: checkpoint ids increase from `next_checkpoint_id`; a checkpoint
    completes at most once, only after every task in `tasks_to_ack` acknowledged and
    the JobMaster finalized it; completed checkpoints complete in increasing id order
    (a completion subsumes every older pending one, savepoints and the final
    checkpoint excepted) and are never discarded; state of a checkpoint that is
    aborted, or acknowledged after it was aborted, is discarded. Assumes one thread
    calls it with a non-decreasing `now_ms`, that `on_tick` comes often (the
    JobMaster: every 20 ms), and that the JobMaster answers each FinalizeCheckpoint
    with `on_checkpoint_finalized` or `on_finalize_failed`.

    As in Flink, a completed savepoint subsumes nothing and a pending savepoint
    holds a max-concurrent slot. Deviations from Flink: an abort, not only a
    completion, starts the min pause; a checkpoint being finalized neither expires
    nor is declined (Flink finalizes under its lock, so it cannot happen there);
    once the final checkpoint is requested, no periodic checkpoint triggers any
    more; a failed savepoint neither counts towards nor resets tolerable failures (but a
    failed final savepoint of a stop fails the attempt, as the sources already stopped).
    See request_decider.py for how trigger requests wait.

    >>> config = CheckpointCoordinatorConfig(interval_ms=100, timeout_ms=500)
    >>> coord = CheckpointCoordinator(config, tasks_to_trigger=frozenset({0}),
    ...                               tasks_to_ack=frozenset({0, 1}), next_checkpoint_id=1)
    >>> coord.start(0), coord.on_tick(50), coord.on_tick(100)
    ([], [], [TriggerCheckpoint(checkpoint_id=1, timestamp_ms=100, is_final=False, \
is_savepoint=False)])
    >>> coord.receive_acknowledge(1, 0, "a", 120)
    (<AcknowledgeResult.SUCCESS: 'the acknowledgement was recorded'>, [])
    >>> coord.receive_acknowledge(1, 1, "b", 130)[1]
    [FinalizeCheckpoint(checkpoint_id=1, timestamp_ms=100, is_final=False, \
task_states={0: 'a', 1: 'b'}, is_savepoint=False)]
    >>> coord.on_checkpoint_finalized(1, 140)
    [NotifyCheckpointComplete(checkpoint_id=1, is_final=False, is_savepoint=False)]
    >>> coord.completed_checkpoint_ids, coord.next_trigger_ms
    ((1,), 200)
    """

    def __init__(
        self,
        config: CheckpointCoordinatorConfig,
        *,
        tasks_to_trigger: frozenset[int],
        tasks_to_ack: frozenset[int],
        next_checkpoint_id: int,
    ) -> None:
        if not tasks_to_ack:
            raise ConfigurationError("a checkpoint needs at least one task to acknowledge it")
        self.config = config
        self.tasks_to_trigger = frozenset(tasks_to_trigger)
        self.tasks_to_ack = frozenset(tasks_to_ack)
        self._first_checkpoint_id = next_checkpoint_id
        self._next_checkpoint_id = next_checkpoint_id
        self._status = CoordinatorStatus.CREATED
        self._pending: dict[int, PendingCheckpoint] = {}
        self._completed_checkpoints: list[int] = []
        self._completed_savepoints: list[int] = []
        self._completed_ids: set[int] = set()
        self._decider = CheckpointRequestDecider(
            interval_ms=config.interval_ms,
            min_pause_ms=config.min_pause_ms,
            max_concurrent=config.max_concurrent,
        )
        self._failure_manager = CheckpointFailureManager(config.tolerable_failures)
        self._final_is_savepoint = False
        """The final checkpoint is a stop's savepoint: if it fails, the attempt fails over."""
        self._fail_job: FailJob | None = None
        """FailJob to append to the current event's actions (it must come last)."""

    # ---- read-only views -------------------------------------------------------------------

    @property
    def status(self) -> CoordinatorStatus:
        return self._status

    @property
    def pending_checkpoint_ids(self) -> tuple[int, ...]:
        """Triggered, neither completed nor aborted (savepoints included), by id."""
        return tuple(sorted(self._pending))

    @property
    def completed_checkpoint_ids(self) -> tuple[int, ...]:
        """Completed checkpoints (savepoints excluded), in completion order."""
        return tuple(self._completed_checkpoints)

    @property
    def completed_savepoint_ids(self) -> tuple[int, ...]:
        return tuple(self._completed_savepoints)

    @property
    def consecutive_failures(self) -> int:
        return self._failure_manager.consecutive_failures

    @property
    def next_trigger_ms(self) -> int | None:
        """When the next periodic (or final) checkpoint may trigger, if a slot is free."""
        if self._status not in (CoordinatorStatus.RUNNING, CoordinatorStatus.FINISHING):
            return None
        return self._decider.next_trigger_ms

    # ---- events ----------------------------------------------------------------------------

    def start(self, now_ms: int) -> list[CoordinatorAction]:
        """Schedule the first periodic checkpoint one interval from now. Returns []."""
        self._require_status("started", CoordinatorStatus.CREATED)
        self._status = CoordinatorStatus.RUNNING
        self._decider.start_periodic(now_ms)
        return []

    def on_tick(self, now_ms: int) -> list[CoordinatorAction]:
        """Expire checkpoints past their timeout, then trigger whatever is due."""
        self._require_started("ticked")
        actions: list[CoordinatorAction] = []
        for checkpoint in self._pending_in_order():
            waited = now_ms - checkpoint.timestamp_ms
            if checkpoint.status is PendingCheckpointStatus.PENDING and (
                waited >= self.config.timeout_ms
            ):
                actions += self._abort(checkpoint, checkpoint.abort_expired(), now_ms)
        return self._finish(actions, now_ms)

    def receive_acknowledge(
        self, checkpoint_id: int, task: int, state_handle: Any, now_ms: int
    ) -> tuple[AcknowledgeResult, list[CoordinatorAction]]:
        """Record a task's state; the last acknowledgement emits FinalizeCheckpoint."""
        checkpoint = self._pending.get(checkpoint_id)
        if checkpoint is not None:
            result = checkpoint.acknowledge_task(task, state_handle)
            if result is AcknowledgeResult.SUCCESS and checkpoint.is_fully_acknowledged:
                return result, [self._finalize(checkpoint)]
            return result, []
        if checkpoint_id in self._completed_ids:
            known = task in self.tasks_to_ack
            return (AcknowledgeResult.DUPLICATE if known else AcknowledgeResult.UNKNOWN), []
        if self._was_aborted(checkpoint_id):
            return AcknowledgeResult.DISCARDED, [DiscardState(checkpoint_id)]
        return AcknowledgeResult.UNKNOWN, []

    def receive_decline(
        self, checkpoint_id: int, task: int, reason: CheckpointFailureReason, now_ms: int
    ) -> list[CoordinatorAction]:
        """Abort the checkpoint with the task's reason; ignored once it is not PENDING."""
        checkpoint = self._pending.get(checkpoint_id)
        if checkpoint is None or checkpoint.status is not PendingCheckpointStatus.PENDING:
            return []
        actions = self._abort(
            checkpoint, checkpoint.abort_declined(reason), now_ms, detail=f" (task {task})"
        )
        return self._finish(actions, now_ms)

    def request_final_checkpoint(
        self, now_ms: int, *, savepoint: bool = False
    ) -> list[CoordinatorAction]:
        """End periodic checkpoints; trigger one with is_final once a slot is free.

        With `savepoint` (a stop with savepoint: the sources were told to stop) the final
        checkpoint is a savepoint, and if it fails it is not retried: FailJob follows, so
        the attempt fails over and the sources resume. Idempotent: a second request, or one
        after the final checkpoint, does nothing.
        """
        self._require_started("asked for a final checkpoint")
        if self._status is not CoordinatorStatus.RUNNING:
            return []
        self._status = CoordinatorStatus.FINISHING
        self._final_is_savepoint = savepoint
        self._decider.request_final(now_ms)
        return self._finish([], now_ms)

    def request_savepoint(self, now_ms: int) -> list[CoordinatorAction]:
        """Trigger a savepoint now, whatever max concurrent and the min pause say."""
        self._require_status(
            "asked for a savepoint", CoordinatorStatus.RUNNING, CoordinatorStatus.FINISHING
        )
        return [self._trigger(now_ms, is_final=False, is_savepoint=True)]

    def on_checkpoint_finalized(self, checkpoint_id: int, now_ms: int) -> list[CoordinatorAction]:
        """`_metadata` is written: complete, subsume older checkpoints, notify the tasks."""
        checkpoint = self._pending.get(checkpoint_id)
        if checkpoint is None:
            return self._late_finalize(checkpoint_id)
        checkpoint.complete()
        del self._pending[checkpoint_id]
        self._completed_ids.add(checkpoint_id)
        self._decider.checkpoint_ended(now_ms)
        actions: list[CoordinatorAction] = []
        if checkpoint.is_savepoint:
            self._completed_savepoints.append(checkpoint_id)
        else:
            self._completed_checkpoints.append(checkpoint_id)
            self._failure_manager.handle_success()
            for older in self._pending_in_order():
                if older.checkpoint_id < checkpoint_id and not (
                    older.is_savepoint or older.is_final
                ):
                    actions += self._abort(older, older.abort_subsumed(), now_ms)
        actions.append(
            NotifyCheckpointComplete(checkpoint_id, checkpoint.is_final, checkpoint.is_savepoint)
        )
        if checkpoint.is_final and self._status is CoordinatorStatus.FINISHING:
            self._status = CoordinatorStatus.FINISHED
            self._decider.stop()
        return self._finish(actions, now_ms)

    def on_finalize_failed(self, checkpoint_id: int, now_ms: int) -> list[CoordinatorAction]:
        """Writing `_metadata` failed: abort the checkpoint; this counts as a failure."""
        checkpoint = self._pending.get(checkpoint_id)
        if checkpoint is None:
            return self._late_finalize(checkpoint_id)
        actions = self._abort(checkpoint, checkpoint.abort_finalize_failed(), now_ms)
        return self._finish(actions, now_ms)

    def abort_pending_on_failover(self, now_ms: int) -> list[CoordinatorAction]:
        """The attempt failed: abort every pending checkpoint (not counted); stop for good."""
        if self._status is CoordinatorStatus.STOPPED:
            return []
        self._status = CoordinatorStatus.STOPPED
        self._decider.stop()
        actions: list[CoordinatorAction] = []
        for checkpoint in self._pending_in_order():
            actions += self._abort(checkpoint, checkpoint.abort_on_failover(), now_ms)
        return actions

    # ---- internals -------------------------------------------------------------------------

    def _trigger(self, now_ms: int, *, is_final: bool, is_savepoint: bool) -> TriggerCheckpoint:
        checkpoint_id = self._next_checkpoint_id
        self._next_checkpoint_id += 1
        self._pending[checkpoint_id] = PendingCheckpoint(
            checkpoint_id,
            now_ms,
            self.tasks_to_ack,
            is_final=is_final,
            is_savepoint=is_savepoint,
        )
        return TriggerCheckpoint(checkpoint_id, now_ms, is_final, is_savepoint)

    def _trigger_due(self, now_ms: int) -> list[CoordinatorAction]:
        if self._status not in (CoordinatorStatus.RUNNING, CoordinatorStatus.FINISHING):
            return []
        request = self._decider.choose(now_ms, pending=len(self._pending))
        if request is None:
            return []
        final = request is TriggerRequest.FINAL
        savepoint = final and self._final_is_savepoint
        return [self._trigger(now_ms, is_final=final, is_savepoint=savepoint)]

    def _finalize(self, checkpoint: PendingCheckpoint) -> FinalizeCheckpoint:
        return FinalizeCheckpoint(
            checkpoint.checkpoint_id,
            checkpoint.timestamp_ms,
            checkpoint.is_final,
            checkpoint.start_finalizing(),
            checkpoint.is_savepoint,
        )

    def _abort(
        self,
        checkpoint: PendingCheckpoint,
        reason: CheckpointFailureReason,
        now_ms: int,
        detail: str = "",
    ) -> list[CoordinatorAction]:
        """Bookkeeping after `checkpoint.abort_*()`; a FailJob waits in `_fail_job`."""
        checkpoint_id = checkpoint.checkpoint_id
        del self._pending[checkpoint_id]
        self._decider.checkpoint_ended(now_ms)
        if not checkpoint.is_savepoint:
            failure = self._failure_manager.handle_failure(checkpoint_id, reason, detail)
            if failure is not None and self._status in (
                CoordinatorStatus.RUNNING,
                CoordinatorStatus.FINISHING,
            ):
                self._status = CoordinatorStatus.FAILING
                self._decider.stop()
                self._fail_job = FailJob(failure)
        if checkpoint.is_final and self._status is CoordinatorStatus.FINISHING:
            if checkpoint.is_savepoint:  # a stop's savepoint: fail over, do not retry
                self._status = CoordinatorStatus.FAILING
                self._decider.stop()
                self._fail_job = FailJob(
                    f"the final savepoint {checkpoint_id} of a stop with savepoint failed: "
                    f"{reason.value}{detail}"
                )
            else:
                self._decider.retry_final(now_ms)
        return [NotifyCheckpointAborted(checkpoint_id, reason), DiscardState(checkpoint_id)]

    def _finish(self, actions: list[CoordinatorAction], now_ms: int) -> list[CoordinatorAction]:
        """Append what a freed slot or passed time lets trigger, then any FailJob, last."""
        actions += self._trigger_due(now_ms)
        if self._fail_job is not None:
            actions.append(self._fail_job)
            self._fail_job = None
        return actions

    def _late_finalize(self, checkpoint_id: int) -> list[CoordinatorAction]:
        """A finalize answer for a checkpoint aborted meanwhile: delete what was written."""
        if self._was_aborted(checkpoint_id):
            return [DiscardState(checkpoint_id)]
        raise CheckpointCoordinatorStateError(
            f"checkpoint {checkpoint_id} was not handed out for finalizing"
        )

    def _was_aborted(self, checkpoint_id: int) -> bool:
        """Every triggered id is pending, completed or aborted: nothing else is remembered."""
        return (
            self._first_checkpoint_id <= checkpoint_id < self._next_checkpoint_id
            and checkpoint_id not in self._pending
            and checkpoint_id not in self._completed_ids
        )

    def _pending_in_order(self) -> list[PendingCheckpoint]:
        return [self._pending[i] for i in sorted(self._pending)]

    def _require_started(self, what: str) -> None:
        if self._status is CoordinatorStatus.CREATED:
            raise CheckpointCoordinatorStateError(
                f"the checkpoint coordinator was {what} before start()"
            )

    def _require_status(self, what: str, *allowed: CoordinatorStatus) -> None:
        if self._status not in allowed:
            raise CheckpointCoordinatorStateError(
                f"the checkpoint coordinator cannot be {what} while {self._status.name}"
            )
