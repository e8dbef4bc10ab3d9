"""The job's published view: what other threads may read of a running job.

The JobMaster thread owns every piece of state; it publishes two immutable
snapshots of it. `JobStatus` (state, attempt, task processes, completed checkpoints)
is what the JobClient waits on; `JobView` (rest.py) is what the REST endpoint
serves. Both are replaced, never mutated, so readers need no lock beyond the
condition that wakes waiters. Savepoint operations (job_actions.py), by trigger id,
are published under the same condition.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from barrierflow._clock import Clock
from barrierflow.cluster.job_actions import SavepointOperation
from barrierflow.cluster.rest import JobView, VertexView
from barrierflow.graph.job_graph import JobGraph, SubtaskId

if TYPE_CHECKING:
    from barrierflow.checkpoint.stats import CheckpointStatsTracker
    from barrierflow.cluster.job_settings import JobSettings

VIEW_PUBLISH_INTERVAL_MS = 100
"""How stale the REST endpoint's checkpoint statistics may be while checkpoints run."""


@dataclass(frozen=True)
class JobStatus:
    """Read by the JobClient from other threads; replaced, never mutated in place."""

    state: str = "CREATED"
    attempt: int = 0
    processes: dict[SubtaskId, tuple[str, int]] = field(default_factory=dict)
    completed_checkpoints: tuple[int, ...] = ()
    restored_from: int | None = None
    rest_url: str | None = None
    """The REST endpoint's base URL (`http://host:port`), None while starting or when off."""


class JobPublisher:
    """Publishes JobStatus and JobView. Publishing: JobMaster thread; reading: any thread."""

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
        self.status = JobStatus()
        self.view: JobView | None = None
        self._operations: dict[str, SavepointOperation] = {}

    # ---- any thread ------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[JobStatus], bool], timeout: float) -> bool:
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

    def publish_view(self) -> None:
        status, settings, coordinator = self.status, self._settings, self._settings.coordinator
        interval = settings.checkpoint_interval_ms
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
            checkpoint_config={
                "interval": interval if interval > 0 else None,
                "timeout": coordinator.timeout_ms,
                "min_pause": coordinator.min_pause_ms,
                "max_concurrent": coordinator.max_concurrent,
                "tolerable_failed_checkpoints": coordinator.tolerable_failures,
                "retained": settings.retained_checkpoints,
                "checkpoint_storage": self._storage_uri,
            },
            restored_from=status.restored_from,
        )
        self._view_dirty = False
        self._view_published_at = self._clock.monotonic()
