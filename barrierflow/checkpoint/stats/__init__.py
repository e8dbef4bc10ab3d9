"""Checkpoint statistics: what every checkpoint, and every subtask in it, took and wrote.

The package's modules, one idea each: `values` (the immutable records), `wording`
(the log line and failure message), `summary` (min/avg/max and percentiles) and
`tracker` (reports in, snapshots out). The history file's codec is
`barrierflow.checkpoint.history_codec`; the REST shapes are
`barrierflow.cluster.rest.bodies`. This module re-exports the names others use.
"""

from barrierflow._bytes import format_bytes
from barrierflow.checkpoint.stats.summary import CompletedCheckpointStatsSummary, StatsSummary
from barrierflow.checkpoint.stats.tracker import (
    DEFAULT_HISTORY_SIZE,
    DEFAULT_SUMMARY_WINDOW,
    CheckpointStatsSnapshot,
    CheckpointStatsTracker,
    IllegalCheckpointStatsTransitionError,
)
from barrierflow.checkpoint.stats.values import (
    CheckpointStats,
    CheckpointStatsCounts,
    CheckpointStatsStatus,
    RestoredCheckpointStats,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)

__all__ = [
    "DEFAULT_HISTORY_SIZE",
    "DEFAULT_SUMMARY_WINDOW",
    "CheckpointStats",
    "CheckpointStatsCounts",
    "CheckpointStatsSnapshot",
    "CheckpointStatsStatus",
    "CheckpointStatsTracker",
    "CompletedCheckpointStatsSummary",
    "IllegalCheckpointStatsTransitionError",
    "RestoredCheckpointStats",
    "StatsSummary",
    "SubtaskCheckpointStats",
    "SubtaskDecline",
    "TaskVertexInfo",
    "format_bytes",
]
