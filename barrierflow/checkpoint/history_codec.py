"""The JSON codec of one checkpoint history record (the lines of `_checkpoint_history.jsonl`).

Version 1 of a record is a checkpoint's statistics with every vertex and subtask,
plus the format version and the id of the job run that wrote it. Its field names
are those of Flink's REST checkpoint details, so a line reads like
`/jobs/<id>/checkpoints/details/<n>`; but this is a persisted format: it changes
only with `HISTORY_FORMAT_VERSION`, whatever the REST endpoint does.

>>> from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsStatus
>>> stats = CheckpointStats(3, CheckpointStatsStatus.IN_PROGRESS, 1_000, ())
>>> record = encode_record(stats, job_id="run-1")
>>> record["version"], record["job_id"], record["id"], record["status"]
(1, 'run-1', 3, 'IN_PROGRESS')
>>> decode_record(record) == HistoryRecord(job_id="run-1", stats=stats)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.stats.values import (
    CheckpointStats,
    CheckpointStatsStatus,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)

__all__ = [
    "HISTORY_FORMAT_VERSION",
    "HistoryRecord",
    "UnreadableRecordError",
    "checkpoint_fields",
    "decode_record",
    "encode_record",
]

HISTORY_FORMAT_VERSION = 1
"""The version of one history record; a reader skips records of versions it does not know."""


@dataclass(frozen=True)
class HistoryRecord:
    """One finished checkpoint of the persisted history, and the job run that wrote it."""

    job_id: str
    stats: CheckpointStats
    version: int = HISTORY_FORMAT_VERSION


class UnreadableRecordError(ValueError):
    """A record of an unknown version, or damaged (by hand or by a broken write)."""


def encode_record(stats: CheckpointStats, *, job_id: str) -> dict[str, Any]:
    """One line of the history, as a JSON-able dict."""
    return {
        "version": HISTORY_FORMAT_VERSION,
        "job_id": job_id,
        **checkpoint_fields(stats, details=True),
    }


def decode_record(record: Any) -> HistoryRecord:
    """The typed record of one line; raises UnreadableRecordError for anything else."""
    if not isinstance(record, dict):
        raise UnreadableRecordError(f"a history record is a JSON object, not {type(record)}")
    version = record.get("version")
    if version != HISTORY_FORMAT_VERSION:
        raise UnreadableRecordError(f"history record version {version!r} is not readable")
    try:
        return HistoryRecord(job_id=str(record.get("job_id", "")), stats=_decode_stats(record))
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UnreadableRecordError(f"damaged history record: {error!r}") from error


# ---- encoding --------------------------------------------------------------------------------


def checkpoint_fields(stats: CheckpointStats, *, details: bool) -> dict[str, Any]:
    """A checkpoint's figures under Flink's REST field names; with `details`, every vertex and
    subtask under "tasks". The REST endpoint serves the same body today (cluster/rest_json)."""
    reason = stats.failure_reason
    fields = {
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
        "checkpointed_size": stats.checkpointed_bytes,
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
        fields["tasks"] = {str(v.vertex_id): _vertex(stats, v) for v in stats.vertices}
    return fields


def _vertex(stats: CheckpointStats, vertex: TaskVertexInfo) -> dict[str, Any]:
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
        "checkpointed_size": sum(a.uploaded_bytes for a in acks),
        "persisted_data": sum(a.persisted_bytes for a in acks),
        "num_subtasks": vertex.parallelism,
        "num_acknowledged_subtasks": len(acks),
        "subtasks": [_subtask(stats, i, r) for i, r in enumerate(results)],
    }


def _subtask(
    stats: CheckpointStats, index: int, result: SubtaskCheckpointStats | SubtaskDecline | None
) -> dict[str, Any]:
    if isinstance(result, SubtaskCheckpointStats):
        return {
            "index": index,
            "status": "completed",
            "ack_timestamp": result.ack_timestamp_ms,
            "end_to_end_duration": result.ack_timestamp_ms - stats.trigger_ms,
            "state_size": result.state_bytes,
            "checkpointed_size": result.uploaded_bytes,
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


# ---- decoding --------------------------------------------------------------------------------


def _decode_stats(data: dict[str, Any]) -> CheckpointStats:
    """The statistics of a version-1 record (derived figures are recomputed, not read)."""
    vertices, acks, declines = [], [], []
    for task in data["tasks"].values():
        vertex = TaskVertexInfo(task["id"], task["name"], task["parallelism"])
        vertices.append(vertex)
        for sub in task["subtasks"]:
            if sub["status"] == "completed":
                acks.append(
                    SubtaskCheckpointStats(
                        vertex.vertex_id,
                        sub["index"],
                        sub["ack_timestamp"],
                        sync_ms=sub["checkpoint"]["sync"],
                        async_ms=sub["checkpoint"]["async"],
                        alignment_ms=sub["alignment"]["duration"],
                        start_delay_ms=sub["start_delay"],
                        state_bytes=sub["state_size"],
                        persisted_bytes=sub["alignment"]["persisted"],
                        unaligned=sub["unaligned_checkpoint"],
                        checkpointed_bytes=_checkpointed(sub),
                    )
                )
            elif sub["status"] == "declined":
                declines.append(
                    SubtaskDecline(
                        vertex.vertex_id,
                        sub["index"],
                        sub["decline_timestamp"],
                        CheckpointFailureReason[sub["reason"]],
                        sub["message"],
                    )
                )
    acks.sort(key=lambda a: (a.ack_timestamp_ms, a.vertex_id, a.subtask_index))
    reason = data["failure_reason"]
    return CheckpointStats(
        checkpoint_id=data["id"],
        status=CheckpointStatsStatus[data["status"]],
        trigger_ms=data["trigger_timestamp"],
        vertices=tuple(vertices),
        acknowledged=tuple(acks),
        declines=tuple(declines),
        is_savepoint=data["is_savepoint"],
        is_final=data["is_final"],
        completion_ms=data["completion_timestamp"],
        failure_ms=data["failure_timestamp"],
        failure_reason=None if reason is None else CheckpointFailureReason[reason],
        failure_message=data["failure_message"],
        external_path=data["external_path"],
    )


def _checkpointed(sub: dict[str, Any]) -> int | None:
    """A subtask's uploaded bytes; None when all its state was (a full checkpoint, or a
    record older than incremental checkpoints)."""
    uploaded = sub.get("checkpointed_size")
    return None if uploaded is None or uploaded == sub["state_size"] else int(uploaded)
