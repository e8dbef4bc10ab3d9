"""What each part of the JobMaster may use of it, and nothing more.

`Attempt` (attempt.py), `CheckpointActions` (checkpoint_actions.py) and the JobMaster's
roles `JobStart` (job_start.py), `JobFailover` (job_failover.py) and `JobEnd` (job_end.py)
are handed the JobMaster, but they see it only through these Protocols: each names exactly
the attributes and calls its user reaches, so a reader knows what a part can touch, and a
change to the JobMaster's other state cannot reach them. The JobMaster satisfies them all;
tests/cluster/test_jobmaster_hosts.py reads the modules and keeps each within its Protocol.
"""

from __future__ import annotations

import queue
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from barrierflow._clock import Clock
    from barrierflow._scheduler import ScheduledAction, Scheduler
    from barrierflow.checkpoint.history import CheckpointHistoryFile
    from barrierflow.checkpoint.lease import CheckpointLease
    from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsTracker
    from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
    from barrierflow.cluster.chaos_faults import ChaosArms
    from barrierflow.cluster.executor.task_logs import JobLogs
    from barrierflow.cluster.jobmaster.attempt import Attempt
    from barrierflow.cluster.jobmaster.failover import FailoverDecider
    from barrierflow.cluster.jobmaster.job_end import JobEnd
    from barrierflow.cluster.jobmaster.job_failover import JobFailover
    from barrierflow.cluster.jobmaster.job_restore import JobRestore
    from barrierflow.cluster.jobmaster.job_settings import JobSettings
    from barrierflow.cluster.jobmaster.job_start import JobStart
    from barrierflow.cluster.jobmaster.job_view import JobPublisher, StatusSnapshot
    from barrierflow.cluster.jobmaster.repeated_failures import RepeatedFailures
    from barrierflow.cluster.jobmaster.rollback import InPlaceRollback
    from barrierflow.cluster.jobmaster.savepoint_requests import SavepointRequests
    from barrierflow.cluster.mails import Mail
    from barrierflow.cluster.metrics.store import MetricsStore
    from barrierflow.cluster.rpc import RpcEndpoint, RpcFactory
    from barrierflow.cluster.spark.runner import AttemptRunner, RunnerFactory
    from barrierflow.graph.job_graph import JobGraph, SubtaskId

__all__ = ["AttemptHost", "CheckpointHost", "EndHost", "FailoverHost", "RoleHost", "StartHost"]


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


class RoleHost(Protocol):
    """What every role of the JobMaster (start, failover, end) uses: the job, its clock,
    published view and restore, and the attempt, Spark stage and restart running now."""

    graph: JobGraph
    clock: Clock
    publisher: JobPublisher
    restoring: JobRestore
    attempt: Attempt | None
    runner: AttemptRunner | None
    stage: int
    restart: ScheduledAction | None

    def stop_attempt(self) -> int: ...

    def spark_group(self, number: int) -> str: ...


class StartHost(RoleHost, Protocol):
    """What `JobStart` uses besides: the job's identity and settings, its folder (lease,
    storage, history, lineage, first checkpoint id), the factories of the Spark runner and
    the RPC endpoint and what they make, the mailbox, logs, metrics, the failover decider it
    makes, the kept tasks of a roll-back, and the failover and end roles it hands over to."""

    job_id: str
    run_id: str
    secret: bytes
    action_token: str
    settings: JobSettings
    partitions: tuple[SubtaskId, ...]
    storage: FileSystemCheckpointStorage
    stats_tracker: CheckpointStatsTracker
    history: CheckpointHistoryFile
    lease: CheckpointLease
    lineage: str
    first_checkpoint_id: int
    scheduler: Scheduler
    mailbox: queue.SimpleQueue[Mail]
    metrics: MetricsStore
    log_dir: Path
    logs: JobLogs | None
    connect_runner: RunnerFactory
    start_rpc: RpcFactory
    rpc: RpcEndpoint | None
    rest: Any
    repeated_failures: RepeatedFailures
    failover: FailoverDecider | None
    rollback: InPlaceRollback | None
    failing_over: JobFailover
    ending: JobEnd

    def next_checkpoint_id(self) -> int: ...


class FailoverHost(RoleHost, Protocol):
    """What `JobFailover` uses besides: the failover decider, a pending cancel, the
    savepoint operations a failure fails, the scheduler for the restart delay, the kept tasks
    of a roll-back, and the start and end roles it hands over to."""

    failover: FailoverDecider | None
    cancel_requested: str | None
    savepoints: SavepointRequests
    scheduler: Scheduler
    rollback: InPlaceRollback | None
    starting: JobStart
    ending: JobEnd


class EndHost(RoleHost, Protocol):
    """What `JobEnd` uses besides: the settings (retention), the folder (lease, storage,
    lineage) and run id for the sinks' clean-up, the published status (attempt, processes),
    a pending cancel, where the outcome goes, `close`, the start role (to renew the lease
    before a clean-up) and the failover role (to drop the kept tasks of a roll-back)."""

    run_id: str
    settings: JobSettings
    storage: FileSystemCheckpointStorage
    lease: CheckpointLease
    lineage: str
    status: StatusSnapshot
    cancel_requested: str | None
    outcome: list[CheckpointStats] | BaseException | None
    ended: bool
    starting: JobStart
    failing_over: JobFailover

    def close(self) -> None: ...
