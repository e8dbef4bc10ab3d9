"""A job's settings as the JobMaster runs it, and the settings each attempt's tasks get."""

from __future__ import annotations

from dataclasses import dataclass, field

from barrierflow.checkpoint import coordinator as cc
from barrierflow.checkpoint import lease
from barrierflow.cluster.jobmaster.repeated_failures import DEFAULT_LIMIT
from barrierflow.cluster.jobmaster.restore_point import SavepointRestoreSettings
from barrierflow.core.restart_strategies import RestartStrategyConfiguration
from barrierflow.core.state_backends import HashMapStateBackend, StateBackend
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime.deployment import TaskSettings


@dataclass
class JobSettings:
    checkpoint_interval_ms: int
    coordinator: cc.CheckpointCoordinatorConfig
    """With checkpointing off, an interval so long only the final checkpoint runs."""
    retained_checkpoints: int
    restart_strategy: RestartStrategyConfiguration
    checkpoint_storage: str
    master: str | None
    buffer_size: int = 1000
    buffer_timeout_ms: int = 50
    rest_port: int | str | None = None
    """0: any free port; a number: that port; "off": no endpoint; None: $BARRIERFLOW_REST_PORT."""
    checkpointing_mode: str = "exactly_once"
    """A CheckpointingMode value."""
    unaligned_checkpoints: bool = False
    aligned_checkpoint_timeout_ms: int = 0
    savepoint_restore: SavepointRestoreSettings | None = None
    """Start from this savepoint or checkpoint instead of the job folder's latest checkpoint."""
    savepoint_dir: str | None = None
    """Where savepoints go unless the trigger names a folder; None: `<storage>/savepoints`."""
    externalized_retention: str = "RETAIN_ON_CANCELLATION"
    """An ExternalizedCheckpointRetention name: DELETE_ON_CANCELLATION deletes the job's
    checkpoint folders when it ends CANCELED."""
    metrics_interval_ms: int = 1000
    """How often each task reports its metrics to the JobMaster (0: at start and end only)."""
    log_dir: str | None = None
    """The job's log folder on the driver; None: cluster/log_dir.job_log_dir(name, id)."""
    task_log_level: str = "WARNING"
    """The lowest level of the tasks' Python log records sent to the task log files."""
    latency_interval_ms: int = 0
    """How often each source subtask emits a latency marker (0: never)."""
    lease_renew_interval_ms: int = lease.RENEW_INTERVAL_MS
    """How often the JobMaster renews the lease of the job's checkpoint folder."""
    lease_expiry_ms: int = lease.EXPIRY_MS
    """How long the lease holds after its last renewal (checkpoint/lease.py)."""
    repeated_failure_limit: int | None = DEFAULT_LIMIT
    """The same failure this many times in a row from one restore point (a record that
    always fails) fails the job, whatever the restart strategy (repeated_failures.py);
    0 or None: never."""
    allow_fallback_duplicates: bool = False
    """A restore that falls back past a damaged checkpoint goes on even when a sink cannot
    take back what the abandoned checkpoints committed (that output is committed again);
    False: such a fallback fails the job naming the choices."""
    state_backend: StateBackend = field(default_factory=HashMapStateBackend)
    """Where keyed operators keep their keyed state (`env.set_state_backend`)."""
    changelog_state_backend: bool = False
    """Changelog checkpoints of heap state (`env.enable_changelog_state_backend`)."""

    def task_settings(
        self,
        job_id: str,
        attempt: int,
        deployment_id: str,
        secret: bytes,
        jobmaster_address: tuple[str, int],
        task_bind_address: str | None,
        checkpoint_dir: str,
        partitions: tuple[SubtaskId, ...],
        lineage: str = "",
    ) -> TaskSettings:
        """What every task of `attempt` is started with (in its payload, or in RestartTask)."""
        return TaskSettings(
            job_id=job_id,
            attempt=attempt,
            deployment_id=deployment_id,
            secret=secret,
            jobmaster_address=jobmaster_address,
            task_bind_address=task_bind_address,
            checkpoint_dir=checkpoint_dir,
            partitions=partitions,
            buffer_size=self.buffer_size,
            buffer_timeout_ms=self.buffer_timeout_ms,
            checkpointing_mode=self.checkpointing_mode,
            unaligned_checkpoints=self.unaligned_checkpoints,
            aligned_checkpoint_timeout_ms=self.aligned_checkpoint_timeout_ms,
            metrics_interval_ms=self.metrics_interval_ms,
            task_log_level=self.task_log_level,
            latency_interval_ms=self.latency_interval_ms,
            lineage=lineage,
            state_backend=self.state_backend,
            changelog_state_backend=self.changelog_state_backend,
        )
