"""What an attempt and its checkpoint actions may use of the JobMaster, and nothing more.

`Attempt` (attempt.py) and `CheckpointActions` (checkpoint_actions.py) are handed the
JobMaster, but they see it only through these Protocols: each names exactly the
attributes and calls its user reaches, so a reader knows what an attempt can touch, and
a change to the JobMaster's other state cannot reach them. The JobMaster satisfies both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from barrierflow._clock import Clock
    from barrierflow._scheduler import Scheduler
    from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsTracker
    from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
    from barrierflow.cluster.chaos_faults import ChaosArms
    from barrierflow.cluster.jobmaster.attempt import Attempt
    from barrierflow.cluster.jobmaster.job_restore import JobRestore
    from barrierflow.cluster.jobmaster.job_settings import JobSettings
    from barrierflow.cluster.jobmaster.job_view import JobPublisher
    from barrierflow.cluster.jobmaster.savepoint_requests import SavepointRequests
    from barrierflow.cluster.metrics.store import MetricsStore
    from barrierflow.graph.job_graph import JobGraph, SubtaskId

__all__ = ["AttemptHost", "CheckpointHost"]


class CheckpointHost(Protocol):
    """What `CheckpointActions` uses: the job's folder and statistics, its published view,
    its savepoint operations, and the job-wide record of completed checkpoints."""

    graph: JobGraph
    settings: JobSettings
    clock: Clock
    partitions: tuple[SubtaskId, ...]
    storage: FileSystemCheckpointStorage
    stats_tracker: CheckpointStatsTracker
    publisher: JobPublisher
    savepoints: SavepointRequests
    checkpoint_stats: list[CheckpointStats]

    def checkpoint_ended(self, stats: CheckpointStats) -> None: ...


class AttemptHost(CheckpointHost, Protocol):
    """What `Attempt` uses besides what it hands its `CheckpointActions`: time and timers,
    the tasks' metrics, the restore's and chaos' settings for a deployment, the Spark tasks'
    processes, the next checkpoint id, and where to say it finished."""

    scheduler: Scheduler
    sources: list[SubtaskId]
    metrics: MetricsStore
    chaos: ChaosArms
    restoring: JobRestore
    spark_tasks: dict[SubtaskId, tuple[str, int]]

    def next_checkpoint_id(self) -> int: ...

    def attempt_finished(self, attempt: Attempt) -> None: ...
