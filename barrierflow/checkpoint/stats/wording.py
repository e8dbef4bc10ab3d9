"""How checkpoint statistics are worded for people: the log line, the failure message."""

from __future__ import annotations

from typing import TYPE_CHECKING

from barrierflow._bytes import format_bytes
from barrierflow.checkpoint.failure import CheckpointFailureReason

if TYPE_CHECKING:
    from barrierflow.checkpoint.stats.values import CheckpointStats

__all__ = ["describe", "failure_message"]

_MISSING_NAMED = 3
"""A failure message names at most this many missing subtasks, then counts the rest."""


def describe(stats: CheckpointStats) -> str:
    """The one log line of a checkpoint: its outcome, duration, size and maxima."""
    status = stats.status.name
    if status == "FAILED":
        return (
            f"{stats.kind} {stats.checkpoint_id} failed after {stats.duration_ms} ms: "
            f"{stats.failure_message}"
        )
    head = f"{stats.kind} {stats.checkpoint_id}"
    if status == "IN_PROGRESS":
        head += (
            f" in progress for {stats.end_to_end_duration_ms} ms "
            f"({stats.num_acknowledged} of {stats.num_subtasks} acknowledged)"
        )
    else:
        head += (
            f" completed in {stats.duration_ms} ms "
            f"(last acknowledgement after {stats.end_to_end_duration_ms} ms)"
        )
    return (
        f"{head}, {format_bytes(stats.state_bytes)} state, "
        f"sync max {stats.max_sync_ms:.0f} ms, async max {stats.max_async_ms:.0f} ms, "
        f"alignment max {stats.max_alignment_ms:.0f} ms, "
        f"start delay max {stats.max_start_delay_ms:.0f} ms"
    )


def failure_message(stats: CheckpointStats, reason: CheckpointFailureReason) -> str:
    """Why a checkpoint failed: the reason, then the subtask that declined first or the
    subtasks never heard from (not for a subsumed one, where silence is expected)."""
    message = reason.value
    if stats.declines:
        first = min(stats.declines, key=lambda d: d.timestamp_ms)
        task = stats.vertex(first.vertex_id).task_name(first.subtask_index)
        said = first.message or (first.reason.value if first.reason is not reason else "")
        return message + f": {task} declined" + (f": {said}" if said else "")
    missing = stats.missing_subtasks()
    if missing and reason is not CheckpointFailureReason.CHECKPOINT_SUBSUMED:
        names = ", ".join(v.task_name(i) for v, i in missing[:_MISSING_NAMED])
        extra = len(missing) - _MISSING_NAMED
        more = f" and {extra} more" if extra > 0 else ""
        message += (
            f" ({stats.num_acknowledged} of {stats.num_subtasks} subtasks acknowledged; "
            f"missing {names}{more})"
        )
    return message
