"""The shared builder and expected-action helpers of the coordinator tests (Flink's
`CheckpointCoordinatorBuilder`). Time is whatever the test passes as now_ms."""

from __future__ import annotations

from barrierflow.checkpoint.coordinator import (
    AcknowledgeResult,
    CheckpointCoordinator,
    CheckpointCoordinatorConfig,
    CoordinatorAction,
    DiscardState,
    FinalizeCheckpoint,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    TriggerCheckpoint,
)
from barrierflow.checkpoint.failure import CheckpointFailureReason

SOURCE = 0
SINK = 1
TASKS = frozenset({SOURCE, SINK})
"""Two tasks acknowledge every checkpoint; only the source is triggered."""


def coordinator_builder(
    *,
    interval_ms: int = 100,
    min_pause_ms: int = 0,
    timeout_ms: int = 1_000,
    max_concurrent: int = 1,
    tolerable_failures: int = 0,
    next_checkpoint_id: int = 1,
    start_ms: int | None = 0,
) -> CheckpointCoordinator:
    """A coordinator over TASKS, started at `start_ms` (None: not started)."""
    coord = CheckpointCoordinator(
        CheckpointCoordinatorConfig(
            interval_ms=interval_ms,
            min_pause_ms=min_pause_ms,
            timeout_ms=timeout_ms,
            max_concurrent=max_concurrent,
            tolerable_failures=tolerable_failures,
        ),
        tasks_to_trigger=frozenset({SOURCE}),
        tasks_to_ack=TASKS,
        next_checkpoint_id=next_checkpoint_id,
    )
    if start_ms is not None:
        assert coord.start(start_ms) == []
    return coord


# ---- expected actions ------------------------------------------------------------------------


def trigger(checkpoint_id: int, at: int, *, final: bool = False) -> TriggerCheckpoint:
    return TriggerCheckpoint(checkpoint_id, at, is_final=final)


def savepoint(checkpoint_id: int, at: int) -> TriggerCheckpoint:
    return TriggerCheckpoint(checkpoint_id, at, is_final=False, is_savepoint=True)


def state(task: int, checkpoint_id: int) -> str:
    """The state handle a task acknowledges a checkpoint with."""
    return f"task-{task}@{checkpoint_id}"


def finalize(
    checkpoint_id: int, triggered_at: int, *, final: bool = False, is_savepoint: bool = False
) -> FinalizeCheckpoint:
    return FinalizeCheckpoint(
        checkpoint_id,
        triggered_at,
        final,
        {task: state(task, checkpoint_id) for task in sorted(TASKS)},
        is_savepoint,
    )


def completed(
    checkpoint_id: int, *, final: bool = False, is_savepoint: bool = False
) -> NotifyCheckpointComplete:
    return NotifyCheckpointComplete(checkpoint_id, final, is_savepoint)


def aborted(checkpoint_id: int, reason: CheckpointFailureReason) -> list[CoordinatorAction]:
    """What every abort emits: tell the tasks, then delete the checkpoint's folder."""
    return [NotifyCheckpointAborted(checkpoint_id, reason), DiscardState(checkpoint_id)]


# ---- driving ---------------------------------------------------------------------------------


def acknowledge_all(coord: CheckpointCoordinator, checkpoint_id: int, now_ms: int) -> list:
    """Every task acknowledges; returns the actions of the last acknowledgement."""
    actions: list = []
    for task in sorted(TASKS):
        result, actions = coord.receive_acknowledge(
            checkpoint_id, task, state(task, checkpoint_id), now_ms
        )
        assert result is AcknowledgeResult.SUCCESS
    return actions


def complete(coord: CheckpointCoordinator, checkpoint_id: int, now_ms: int) -> list:
    """Acknowledge, finalize and complete a checkpoint; returns on_checkpoint_finalized's
    actions."""
    [finalize_action] = acknowledge_all(coord, checkpoint_id, now_ms)
    assert isinstance(finalize_action, FinalizeCheckpoint)
    assert finalize_action.checkpoint_id == checkpoint_id
    return coord.on_checkpoint_finalized(checkpoint_id, now_ms)
