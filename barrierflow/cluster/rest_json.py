"""The JSON bodies of the REST endpoint, in Flink's REST shapes (job overview, job details,
checkpoint statistics). Pure functions of immutable views; the server is `rest.py`.

Field names follow Flink's `/jobs/...` responses in snake_case where barrierflow
always wrote them so. The persisted history has its own codec
(`barrierflow.checkpoint.history_codec`): the two start out alike, but the REST
shape may grow without a new history file version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsCounts,
    CheckpointStatsSnapshot,
    CompletedCheckpointStatsSummary,
    RestoredCheckpointStats,
    StatsSummary,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.checkpoint.stats.summary import SUMMARY_FIGURES

if TYPE_CHECKING:
    from barrierflow.cluster.rest import JobView

__all__ = [
    "checkpoint_json",
    "checkpoints_json",
    "counts_json",
    "job_json",
    "job_overview_json",
    "restored_json",
    "summary_json",
]


# ---- the job -----------------------------------------------------------------------------------


def job_overview_json(view: JobView) -> dict[str, Any]:
    """One entry of `/jobs/overview`."""
    return {
        "jid": view.job_id,
        "name": view.name,
        "state": view.state,
        "attempt": view.attempt,
        "start-time": view.start_ms,
        "end-time": -1,
        "duration": view.published_ms - view.start_ms,
        "last-modification": view.published_ms,
        "tasks": {"total": sum(v.parallelism for v in view.vertices)},
    }


def job_json(view: JobView) -> dict[str, Any]:
    """`/jobs/<id>`: the overview, the restored checkpoint and every vertex."""
    return {
        **job_overview_json(view),
        "now": view.published_ms,
        "restored_from": view.restored_from,
        "vertices": [
            {
                "id": v.vertex_id,
                "name": v.name,
                "parallelism": v.parallelism,
                "operators": [{"uid": uid, "name": name} for uid, name in v.operators],
            }
            for v in view.vertices
        ],
    }


# ---- checkpoint statistics ---------------------------------------------------------------------


def checkpoints_json(snapshot: CheckpointStatsSnapshot) -> dict[str, Any]:
    """`/jobs/<id>/checkpoints`: counts, summary, latest of each kind, history (no details)."""

    def entry(stats: CheckpointStats | None) -> dict[str, Any] | None:
        return None if stats is None else checkpoint_json(stats)

    restored = snapshot.latest_restored
    return {
        "counts": counts_json(snapshot.counts),
        "summary": summary_json(snapshot.summary),
        "latest": {
            "completed": entry(snapshot.latest_completed),
            "savepoint": entry(snapshot.latest_savepoint),
            "failed": entry(snapshot.latest_failed),
            "restored": None if restored is None else restored_json(restored),
        },
        "history": [checkpoint_json(stats) for stats in snapshot.history],
    }


def counts_json(counts: CheckpointStatsCounts) -> dict[str, int]:
    return {
        "restored": counts.restored,
        "total": counts.triggered,
        "in_progress": counts.in_progress,
        "completed": counts.completed,
        "failed": counts.failed,
    }


def summary_json(summary: CompletedCheckpointStatsSummary) -> dict[str, Any]:
    """Every summarised figure, an empty one with None values (not zeros)."""
    return {name: _stats_summary(summary[name]) for name in SUMMARY_FIGURES}


def _stats_summary(summary: StatsSummary) -> dict[str, Any]:
    return {
        "count": summary.count,
        "min": summary.min,
        "max": summary.max,
        "avg": summary.avg,
        "p50": summary.p50,
        "p99": summary.p99,
    }


def restored_json(restored: RestoredCheckpointStats) -> dict[str, Any]:
    return {
        "id": restored.checkpoint_id,
        "restore_timestamp": restored.restore_ms,
        "is_savepoint": restored.is_savepoint,
        "external_path": restored.external_path,
    }


def checkpoint_json(stats: CheckpointStats, *, details: bool = False) -> dict[str, Any]:
    """Flink's `CheckpointStatistics`; with `details`, every vertex and subtask under "tasks"
    (`/jobs/<id>/checkpoints/details/<n>`)."""
    reason = stats.failure_reason
    result: dict[str, Any] = {
        "id": stats.checkpoint_id,
        "status": stats.status.name,
        "is_savepoint": stats.is_savepoint,
        "is_final": stats.is_final,
        "checkpoint_type": "SAVEPOINT" if stats.is_savepoint else "CHECKPOINT",
        "trigger_timestamp": stats.trigger_ms,
        "latest_ack_timestamp": stats.latest_ack_ms,
        "completion_timestamp": stats.completion_ms,
        "end_to_end_duration": stats.end_to_end_duration_ms,
        "duration": stats.duration_ms,
        "state_size": stats.state_bytes,
        "persisted_data": stats.persisted_bytes,
        "sync_duration_max": stats.max_sync_ms,
        "async_duration_max": stats.max_async_ms,
        "alignment_duration_max": stats.max_alignment_ms,
        "start_delay_max": stats.max_start_delay_ms,
        "num_subtasks": stats.num_subtasks,
        "num_acknowledged_subtasks": stats.num_acknowledged,
        "external_path": stats.external_path,
        "failure_timestamp": stats.failure_ms,
        "failure_reason": None if reason is None else reason.name,
        "failure_message": stats.failure_message,
    }
    if details:
        result["tasks"] = {str(v.vertex_id): _vertex_json(stats, v) for v in stats.vertices}
    return result


def _vertex_json(stats: CheckpointStats, vertex: TaskVertexInfo) -> dict[str, Any]:
    results = stats.subtask_results(vertex)
    acks = [r for r in results if isinstance(r, SubtaskCheckpointStats)]
    latest = max((a.ack_timestamp_ms for a in acks), default=None)
    return {
        "id": vertex.vertex_id,
        "name": vertex.name,
        "parallelism": vertex.parallelism,
        "status": stats.status.name,
        "latest_ack_timestamp": latest,
        "end_to_end_duration": None if latest is None else latest - stats.trigger_ms,
        "state_size": sum(a.state_bytes for a in acks),
        "persisted_data": sum(a.persisted_bytes for a in acks),
        "num_subtasks": vertex.parallelism,
        "num_acknowledged_subtasks": len(acks),
        "subtasks": [_subtask_json(stats, i, r) for i, r in enumerate(results)],
    }


def _subtask_json(
    stats: CheckpointStats, index: int, result: SubtaskCheckpointStats | SubtaskDecline | None
) -> dict[str, Any]:
    if isinstance(result, SubtaskCheckpointStats):
        return {
            "index": index,
            "status": "completed",
            "ack_timestamp": result.ack_timestamp_ms,
            "end_to_end_duration": result.ack_timestamp_ms - stats.trigger_ms,
            "state_size": result.state_bytes,
            "checkpoint": {"sync": result.sync_ms, "async": result.async_ms},
            "alignment": {"duration": result.alignment_ms, "persisted": result.persisted_bytes},
            "start_delay": result.start_delay_ms,
            "unaligned_checkpoint": result.unaligned,
        }
    if isinstance(result, SubtaskDecline):
        return {
            "index": index,
            "status": "declined",
            "decline_timestamp": result.timestamp_ms,
            "reason": result.reason.name,
            "message": result.message,
        }
    return {"index": index, "status": "pending_or_failed"}
