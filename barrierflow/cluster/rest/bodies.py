"""The JSON bodies of the REST endpoint, in Flink's REST shapes (job overview, job details,
checkpoint statistics). Pure functions of immutable views; the server is `server.py`.

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
from barrierflow.cluster.jobmaster.views import JobStatus, Recovery
from barrierflow.cluster.metrics.json_bodies import VERTEX_FIGURES, subtask_json

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.views import FailureEntry, JobView, VertexView
    from barrierflow.cluster.metrics.view import MetricsSnapshot

__all__ = [
    "checkpoint_json",
    "checkpoints_json",
    "cluster_overview_json",
    "config_json",
    "counts_json",
    "exceptions_json",
    "job_json",
    "job_overview_json",
    "plan_json",
    "restored_json",
    "summary_json",
    "vertex_json",
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
    """`/jobs/<id>`: the overview, the restored checkpoint, every vertex, the edges between
    them (the plan, as `/jobs/<id>/plan`) and the Spark UI's address."""
    return {
        **job_overview_json(view),
        "now": view.published_ms,
        "restored_from": view.restored_from,
        "max_parallelism": view.max_parallelism,
        "spark_ui": view.spark_ui,
        "vertices": [
            {
                "id": v.vertex_id,
                "name": v.name,
                "parallelism": v.parallelism,
                "operators": [{"uid": uid, "name": name} for uid, name in v.operators],
            }
            for v in view.vertices
        ],
        "edges": [
            {
                "source": e.source,
                "target": e.target,
                "partitioning": e.partitioning,
                "side_output": e.side_output,
                "target_input": e.target_input,
            }
            for e in view.edges
        ],
        "plan": plan_json(view),
    }


def plan_json(view: JobView) -> dict[str, Any]:
    """Flink's job plan: each node with its inputs and their ship strategy (partitioning)."""
    return {
        "jid": view.job_id,
        "name": view.name,
        "type": "STREAMING",
        "nodes": [
            {
                "id": str(v.vertex_id),
                "parallelism": v.parallelism,
                "operator": v.name,
                "description": v.name,
                "inputs": [
                    {
                        "num": number,
                        "id": str(e.source),
                        "ship_strategy": e.partitioning,
                        "exchange": "pipelined_bounded",
                    }
                    for number, e in enumerate(e for e in view.edges if e.target == v.vertex_id)
                ],
            }
            for v in view.vertices
        ],
    }


def cluster_overview_json(view: JobView) -> dict[str, Any]:
    """`/overview`: Flink's cluster overview of this endpoint's one job."""
    running = not JobStatus.ended(view.state)
    return {
        "jobs-running": int(running),
        "jobs-finished": int(view.state == JobStatus.FINISHED),
        "jobs-cancelled": int(view.state == JobStatus.CANCELED),
        "jobs-failed": int(view.state == JobStatus.FAILED),
        "slots-total": sum(v.parallelism for v in view.vertices),
        "spark_ui": view.spark_ui,
    }


def config_json(view: JobView) -> dict[str, Any]:
    """`/jobs/<id>/config`: the job's settings as published (job_view.job_config)."""
    return {"jid": view.job_id, "name": view.name, **view.config, "spark_ui": view.spark_ui}


def exceptions_json(view: JobView) -> dict[str, Any]:
    """`/jobs/<id>/exceptions`: the failure history, newest first, as Flink's
    `exceptionHistory`, and the restart strategy's state."""
    entries = [_failure_json(entry) for entry in reversed(view.exceptions)]
    latest = entries[0] if entries else None
    return {
        "root-exception": latest["root_cause"] if latest else None,
        "timestamp": latest["timestamp"] if latest else None,
        "truncated": view.exceptions_truncated,
        "exceptionHistory": {"entries": entries, "truncated": view.exceptions_truncated},
        "restart_strategy": restart_state_json(view),
    }


def _failure_json(entry: FailureEntry) -> dict[str, Any]:
    return {
        "timestamp": entry.timestamp_ms,
        "attempt": entry.attempt,
        "root_cause": entry.root_cause,
        "exceptionName": entry.exception,
        "taskName": entry.task,
        "stacktrace": entry.traceback,
        "recovery": entry.recovery,
        "delay_ms": entry.delay_ms,
        "explanation": entry.explanation,
    }


def restart_state_json(view: JobView) -> dict[str, Any]:
    """The strategy's settings, the restarts so far, its limit, the last and next delay and,
    for the failure-rate strategy, the failures within its window now."""
    strategy = view.restart_strategy
    restarts = [e for e in view.exceptions if e.recovery != Recovery.NONE]
    kind = strategy.get("type")
    state: dict[str, Any] = {
        **strategy,
        "restarts": len(restarts),
        "last_delay_ms": restarts[-1].delay_ms if restarts else None,
    }
    if kind == "fixed-delay":
        state["limit"] = strategy.get("restart_attempts")
        state["next_delay_ms"] = strategy.get("delay_ms")
    elif kind == "failure-rate":
        window = strategy.get("failure_interval_ms") or 0
        since = view.published_ms - window
        state["limit"] = strategy.get("max_failures_per_interval")
        state["next_delay_ms"] = strategy.get("delay_ms")
        state["failures_in_window"] = sum(1 for e in view.exceptions if e.timestamp_ms > since)
    elif kind == "exponential-delay":
        state["limit"] = strategy.get("attempts_before_reset_backoff")
        state["next_delay_ms"] = None  # jittered: known when the next failure comes
    else:
        state["limit"] = 0
        state["next_delay_ms"] = None
    return state


def vertex_json(
    view: JobView, vertex: VertexView, metrics: MetricsSnapshot | None
) -> dict[str, Any]:
    """`/jobs/<id>/vertices/<vid>`: the vertex and each subtask's host, pid, status and latest
    metrics (None before its first report)."""
    reported = (
        {}
        if metrics is None
        else {s.subtask_index: s for s in metrics.subtasks_of(vertex.vertex_id)}
    )
    aggregate = None if metrics is None else metrics.vertex(vertex.vertex_id)
    subtasks = []
    for index in range(vertex.parallelism):
        process = view.processes.get((vertex.vertex_id, index))
        report = reported.get(index)
        subtasks.append(
            {
                "subtask": index,
                "status": _subtask_status(view.state, process is not None),
                "attempt": view.attempt,
                "host": process[0] if process else None,
                "pid": process[1] if process else None,
                "metrics": None if report is None else subtask_json(report),
            }
        )
    return {
        "id": vertex.vertex_id,
        "name": vertex.name,
        "parallelism": vertex.parallelism,
        "maxParallelism": view.max_parallelism,
        "now": view.published_ms,
        "operators": [{"uid": uid, "name": name} for uid, name in vertex.operators],
        "metrics": None
        if aggregate is None
        else {
            "reporting": aggregate.reporting,
            **{name: getattr(aggregate, name) for name in VERTEX_FIGURES},
        },
        "subtasks": subtasks,
    }


def _subtask_status(job_state: str, registered: bool) -> str:
    """A subtask's state as the JobMaster knows it: the job's once its task registered in
    this attempt (DEPLOYING, RUNNING, or how the job ended), else SCHEDULED while the job
    deploys.

    >>> _subtask_status("RUNNING", True), _subtask_status("DEPLOYING", False)
    ('RUNNING', 'SCHEDULED')
    """
    if registered or JobStatus.ended(job_state):
        return job_state
    deploying = (JobStatus.CREATED, JobStatus.DEPLOYING, JobStatus.RESTARTING)
    return "SCHEDULED" if job_state in deploying else job_state


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
