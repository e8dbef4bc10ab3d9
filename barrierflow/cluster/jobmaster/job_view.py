"""The job's published view: what other threads may read of a running job.

The JobMaster thread owns every piece of state; it publishes two immutable
snapshots of it. `StatusSnapshot` (the `JobStatus` enum of views.py, attempt, task
processes, completed checkpoints) is what the JobClient waits on; `JobView` (views.py) is
what the REST endpoint serves. Both are replaced, never mutated, so readers need no lock beyond the
condition that wakes waiters. Savepoint operations (job_actions.py), by trigger id,
are published under the same condition.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from barrierflow._clock import Clock
from barrierflow.cluster.jobmaster.views import (
    EdgeView,
    FailureEntry,
    JobStatus,
    JobView,
    SavepointOperation,
    VertexView,
)
from barrierflow.cluster.log_dir import job_log_dir
from barrierflow.core.restart_strategies import (
    ExponentialDelayRestartStrategyConfiguration,
    FailureRateRestartStrategyConfiguration,
    FixedDelayRestartStrategyConfiguration,
    NoRestartStrategyConfiguration,
    RestartStrategyConfiguration,
)
from barrierflow.graph.job_graph import JobGraph, SubtaskId

if TYPE_CHECKING:
    from barrierflow.checkpoint.stats import CheckpointStatsTracker
    from barrierflow.cluster.jobmaster.job_settings import JobSettings

VIEW_PUBLISH_INTERVAL_MS = 100
"""How stale the REST endpoint's checkpoint statistics may be while checkpoints run."""
MAX_FAILURE_HISTORY = 100
"""How many failures the exception history keeps (the newest)."""


@dataclass(frozen=True)
class StatusSnapshot:
    """Read by the JobClient from other threads; replaced, never mutated in place."""

    state: JobStatus = JobStatus.CREATED
    attempt: int = 0
    processes: dict[SubtaskId, tuple[str, int]] = field(default_factory=dict)
    completed_checkpoints: tuple[int, ...] = ()
    restored_from: int | None = None
    rest_url: str | None = None
    """The REST endpoint's base URL (`http://host:port`), None while starting or when off."""


class JobPublisher:
    """Publishes StatusSnapshot and JobView. Publishing: JobMaster thread; reading: any thread."""

    def __init__(
        self,
        job_id: str,
        graph: JobGraph,
        settings: JobSettings,
        checkpoint_storage_uri: str,
        stats: CheckpointStatsTracker,
        clock: Clock,
    ) -> None:
        self._job_id = job_id
        self._graph = graph
        self._settings = settings
        self._storage_uri = checkpoint_storage_uri
        self._stats = stats
        self._clock = clock
        self._start_ms = clock.epoch_millis()
        self._changed = threading.Condition()
        self._view_dirty = False
        self._view_published_at = 0.0
        self.status = StatusSnapshot()
        self.view: JobView | None = None
        self._operations: dict[str, SavepointOperation] = {}
        self._failures: deque[FailureEntry] = deque(maxlen=MAX_FAILURE_HISTORY)
        self._failures_dropped = False
        self.spark_ui: str | None = None
        """The Spark UI's address (set by the JobMaster once Spark runs; None: UI off)."""
        self._log_dir = str(job_log_dir(graph.job_name, job_id))
        self._edges = tuple(
            EdgeView(
                e.source_vertex, e.target_vertex, repr(e.partitioner), e.side_output, e.target_input
            )
            for e in graph.edges
        )

    # ---- any thread ------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[StatusSnapshot], bool], timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self.status), timeout)

    def operation(self, trigger_id: str) -> SavepointOperation | None:
        with self._changed:
            return self._operations.get(trigger_id)

    def wait_for_operation(self, trigger_id: str, timeout: float) -> SavepointOperation | None:
        """The operation once it ended (COMPLETED or FAILED), else as it is after `timeout`."""
        with self._changed:
            self._changed.wait_for(
                lambda: getattr(self._operations.get(trigger_id), "status", "") != "IN_PROGRESS",
                timeout,
            )
            return self._operations.get(trigger_id)

    def publish_operation(self, operation: SavepointOperation) -> None:
        """Publish a savepoint operation (any thread: the trigger publishes IN_PROGRESS)."""
        with self._changed:
            self._operations[operation.trigger_id] = operation
            self._changed.notify_all()

    def fail_operations(self, reason: str) -> None:
        """Every operation still in progress FAILED with `reason` (the job ended)."""
        with self._changed:
            for trigger_id, operation in list(self._operations.items()):
                if operation.status == "IN_PROGRESS":
                    self._operations[trigger_id] = replace(
                        operation, status="FAILED", failure=reason
                    )
            self._changed.notify_all()

    def wake_waiters(self) -> None:
        """Let waiters look again (the job's thread ended)."""
        with self._changed:
            self._changed.notify_all()

    # ---- JobMaster thread --------------------------------------------------------------------

    def publish(self, **changes: Any) -> None:
        """Replace the status with `changes` applied, wake waiters, and publish the view."""
        with self._changed:
            self.status = replace(self.status, **changes)
            self._changed.notify_all()
        self.publish_view()

    def mark_dirty(self) -> None:
        """Checkpoint statistics changed: publish them within VIEW_PUBLISH_INTERVAL_MS."""
        self._view_dirty = True

    def publish_view_if_due(self) -> None:
        """Publish changed statistics at most every VIEW_PUBLISH_INTERVAL_MS."""
        elapsed_ms = (self._clock.monotonic() - self._view_published_at) * 1000
        if self._view_dirty and elapsed_ms >= VIEW_PUBLISH_INTERVAL_MS:
            self.publish_view()

    def record_failure(self, entry: FailureEntry) -> None:
        """Add a failure to the exception history (the oldest goes beyond
        MAX_FAILURE_HISTORY); shown with the next published view."""
        self._failures_dropped |= len(self._failures) == self._failures.maxlen
        self._failures.append(entry)

    def publish_view(self) -> None:
        status, settings, coordinator = self.status, self._settings, self._settings.coordinator
        interval = settings.checkpoint_interval_ms
        checkpoint_config = {
            "interval": interval if interval > 0 else None,
            "timeout": coordinator.timeout_ms,
            "min_pause": coordinator.min_pause_ms,
            "max_concurrent": coordinator.max_concurrent,
            "tolerable_failed_checkpoints": coordinator.tolerable_failures,
            "retained": settings.retained_checkpoints,
            "checkpoint_storage": _without_credentials(self._storage_uri),
            # Flink's name and value: the settings class, e.g. "EmbeddedRocksDBStateBackend"
            "state_backend": type(settings.state_backend).__name__,
        }
        self.view = JobView(
            job_id=self._job_id,
            name=self._graph.job_name,
            state=status.state,
            attempt=status.attempt,
            start_ms=self._start_ms,
            published_ms=self._clock.epoch_millis(),
            vertices=tuple(
                VertexView(
                    v.vertex_id,
                    v.name,
                    v.parallelism,
                    tuple((op.uid, op.name) for op in v.operators),
                )
                for v in self._graph.vertices
            ),
            checkpoints=self._stats.snapshot(),
            checkpoint_config=checkpoint_config,
            restored_from=status.restored_from,
            max_parallelism=self._graph.max_parallelism,
            edges=self._edges,
            processes={(s.vertex_id, s.subtask_index): p for s, p in status.processes.items()},
            config=job_config(self._graph, settings, checkpoint_config),
            spark_ui=self.spark_ui,
            exceptions=tuple(self._failures),
            exceptions_truncated=self._failures_dropped,
            restart_strategy=restart_strategy_json(settings.restart_strategy),
            log_dir=self._log_dir,
        )
        self._view_dirty = False
        self._view_published_at = self._clock.monotonic()


def job_config(
    graph: JobGraph, settings: JobSettings, checkpoint_config: dict[str, Any]
) -> dict[str, Any]:
    """`/jobs/<id>/config`: what the job runs with. No secrets: the job's secret and token are
    not settings, and credentials in a storage URI are left out."""
    savepoints = settings.savepoint_dir
    return {
        "parallelism": max((v.parallelism for v in graph.vertices), default=1),
        "max_parallelism": graph.max_parallelism,
        "checkpointing": {
            **checkpoint_config,
            "mode": settings.checkpointing_mode,
            "unaligned": settings.unaligned_checkpoints,
            "aligned_checkpoint_timeout": settings.aligned_checkpoint_timeout_ms,
            "externalized_retention": settings.externalized_retention,
        },
        "restart_strategy": restart_strategy_json(settings.restart_strategy),
        "storage": {
            "checkpoints": _without_credentials(settings.checkpoint_storage),
            "savepoints": None if savepoints is None else _without_credentials(savepoints),
        },
        "spark": {"master": settings.master},
        "network": {
            "buffer_size": settings.buffer_size,
            "buffer_timeout_ms": settings.buffer_timeout_ms,
        },
        "auto_watermark_interval_ms": graph.auto_watermark_interval_ms,
        "metrics_interval_ms": settings.metrics_interval_ms,
    }


def restart_strategy_json(config: RestartStrategyConfiguration) -> dict[str, Any]:
    """The strategy's kind and settings.

    >>> from barrierflow.core.restart_strategies import RestartStrategies
    >>> restart_strategy_json(RestartStrategies.fixed_delay_restart(3, 500))
    {'type': 'fixed-delay', 'restart_attempts': 3, 'delay_ms': 500}
    """
    if isinstance(config, FixedDelayRestartStrategyConfiguration):
        return {"type": "fixed-delay", "restart_attempts": config.restart_attempts,
                "delay_ms": config.delay_between_attempts_ms}  # fmt: skip
    if isinstance(config, FailureRateRestartStrategyConfiguration):
        return {
            "type": "failure-rate",
            "max_failures_per_interval": config.max_failures_per_interval,
            "failure_interval_ms": config.failure_interval_ms,
            "delay_ms": config.delay_between_attempts_ms,
        }
    if isinstance(config, ExponentialDelayRestartStrategyConfiguration):
        return {"type": "exponential-delay", **dataclasses.asdict(config)}
    if isinstance(config, NoRestartStrategyConfiguration):
        return {"type": "no-restart"}
    return {"type": type(config).__name__}


def _without_credentials(uri: str) -> str:
    """`uri` without a user or password in it.

    >>> _without_credentials("s3a://key:secret@bucket/jobs"), _without_credentials("/tmp/c")
    ('s3a://bucket/jobs', '/tmp/c')
    """
    parts = urlsplit(uri)
    if "@" not in parts.netloc:
        return uri
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
