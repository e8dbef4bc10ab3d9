"""The JSON bodies of the REST endpoint, in Flink's REST shapes (job overview, job details,
checkpoint statistics). Pure functions of immutable views; the server is `rest.py`.

Field names follow Flink's `/jobs/...` responses in snake_case where barrierflow
always wrote them so. A checkpoint's body is the persisted history's
(`barrierflow.checkpoint.history_codec.checkpoint_fields`); a field only the REST
endpoint serves is added here, so the history file keeps its version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from barrierflow.checkpoint.history_codec import checkpoint_fields
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsCounts,
    CheckpointStatsSnapshot,
    CompletedCheckpointStatsSummary,
    RestoredCheckpointStats,
    StatsSummary,
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
    (`/jobs/<id>/checkpoints/details/<n>`). The same fields as a history record today; a
    field only the REST endpoint serves is added here."""
    return checkpoint_fields(stats, details=details)
