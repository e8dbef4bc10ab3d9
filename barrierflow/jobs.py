"""Jobs seen from outside their job file: the ones running on this host, a job's checkpoints
and their statistics in its checkpoint folder, a stopped job's sinks cleaned up, and the
read models a running job publishes.

What the `barrierflow` command line reads (`list`, `checkpoints`, `cleanup`, the progress
of `run`) is public here, so a script can read the same:

>>> import tempfile
>>> from pathlib import Path
>>> registry = JobRegistry(Path(tempfile.mkdtemp()) / "jobs")
>>> registry.entries()  # what `barrierflow list` shows; JobRegistry.default() is the user's
[]
>>> format_bytes(1_258_291)
'1.2 MiB'

A running job's own state is read through its `JobClient` (`barrierflow.JobClient`).
"""

from barrierflow._bytes import format_bytes
from barrierflow.api.job_file import SinkCleanup, clean_up_job_file
from barrierflow.api.job_folder import (
    JobCheckpoints,
    RetainedCheckpoint,
    checkpoint_summary,
    read_checkpoints,
)
from barrierflow.checkpoint.history_codec import HistoryRecord
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsStatus,
    SubtaskCheckpointStats,
    SubtaskDecline,
)
from barrierflow.cluster.jobmaster.views import JobStatus, JobView
from barrierflow.cluster.metrics.view import MetricsSnapshot
from barrierflow.cluster.registry import JobEntry, JobRegistry
from barrierflow.graph.job_graph import JobGraph

__all__ = [
    "CheckpointStats",
    "CheckpointStatsStatus",
    "HistoryRecord",
    "JobCheckpoints",
    "JobEntry",
    "JobGraph",
    "JobRegistry",
    "JobStatus",
    "JobView",
    "MetricsSnapshot",
    "RetainedCheckpoint",
    "SinkCleanup",
    "SubtaskCheckpointStats",
    "SubtaskDecline",
    "checkpoint_summary",
    "clean_up_job_file",
    "format_bytes",
    "read_checkpoints",
]
