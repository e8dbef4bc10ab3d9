"""The JobMaster's read models: the immutable values it publishes for other threads.

The REST endpoint, the CLI and `JobClient` read a running job only through these (the
JobMaster thread builds a new `JobView` at each change, so readers need no lock), and a
triggered savepoint's state as a `SavepointOperation`. They live beside the JobMaster,
which they describe, not in the HTTP layer that serves them. A job's lifecycle is the
`JobStatus` enum and how a failure was recovered the `Recovery` enum: both are `StrEnum`s,
so they compare equal to, print as and serialize to JSON as the strings they always were.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from barrierflow.checkpoint.stats import CheckpointStatsSnapshot

__all__ = [
    "EdgeView",
    "FailureEntry",
    "JobStatus",
    "JobView",
    "Recovery",
    "SavepointOperation",
    "SavepointStatus",
    "VertexView",
]


class JobStatus(StrEnum):
    """Where a job is in its lifecycle (Flink's JobStatus, as the REST API shows it)."""

    CREATED = "CREATED"
    DEPLOYING = "DEPLOYING"
    RUNNING = "RUNNING"
    FINISHING = "FINISHING"
    """The final checkpoint was triggered (end of input or stop with savepoint)."""
    RESTARTING = "RESTARTING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"

    @property
    def is_terminal(self) -> bool:
        """A state the job never leaves (the one definition of "the job ended")."""
        return self in _TERMINAL

    @staticmethod
    def ended(state: str | None) -> bool:
        """`is_terminal` for a state read as text (a REST response), unknown text included.

        >>> JobStatus.ended("CANCELED"), JobStatus.ended("RUNNING"), JobStatus.ended(None)
        (True, False, False)
        """
        return state in _TERMINAL

    def result(self, timeout: float | None = None) -> JobStatus:
        """The status itself: PyFlink's `JobClient.get_job_status()` returns a future of the
        status, so a ported `client.get_job_status().result()` reads it unchanged.

        >>> JobStatus.RUNNING.result()
        <JobStatus.RUNNING: 'RUNNING'>
        """
        return self


_TERMINAL = frozenset({JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED})


class Recovery(StrEnum):
    """How the job went on after an attempt failed (the exception history's `recovery`)."""

    IN_PLACE = "in-place"
    """Rolled back in the same Spark job: the task processes run the next attempt."""
    NEW_STAGE = "new-stage"
    """The Spark job was cancelled; the next attempt is a new barrier stage."""
    NONE = "none"
    """No restart: the job failed."""


SavepointStatus = Literal["IN_PROGRESS", "COMPLETED", "FAILED"]


@dataclass(frozen=True)
class SavepointOperation:
    """One savepoint the job was asked for (Flink's asynchronous operation result)."""

    trigger_id: str
    status: SavepointStatus
    location: str | None = None
    """The savepoint's folder (a URI) once COMPLETED."""
    failure: str | None = None
    """Why it FAILED, in one line."""
    stops_job: bool = False
    """A stop with savepoint: the job ends FINISHED once it completed."""


@dataclass(frozen=True)
class VertexView:
    """A vertex of the job graph as the endpoint shows it."""

    vertex_id: int
    name: str
    parallelism: int
    operators: tuple[tuple[str, str], ...] = ()
    """(uid, name) of each chained operator."""


@dataclass(frozen=True)
class EdgeView:
    """An edge of the job graph: records from `source` to `target`, partitioned so."""

    source: int
    target: int
    partitioning: str
    """"FORWARD", "HASH", "REBALANCE", "BROADCAST" (the partitioner's name, as Flink's
    ship strategy)."""
    side_output: str | None = None
    target_input: int = 0


@dataclass(frozen=True)
class FailureEntry:
    """One failure of an attempt, as the exception history shows it."""

    timestamp_ms: int
    attempt: int
    root_cause: str
    """The one readable line (AttemptFailure.summary)."""
    exception: str | None = None
    """The exception's class name, if there is one."""
    task: str | None = None
    """The task it came from, e.g. "'Reduce -> Sink' (2/2)"; None if no task reported it."""
    traceback: str | None = None
    """The task's remote traceback, if it sent one."""
    recovery: Recovery = Recovery.NONE
    delay_ms: int | None = None
    """The restart delay (None when it did not restart)."""
    explanation: str = ""
    """The restart strategy's (or the restore's) word on it."""


@dataclass(frozen=True)
class JobView:
    """What the endpoint shows of one job at one moment. Built by the JobMaster thread;
    immutable, so HTTP threads read it without locks."""

    job_id: str
    name: str
    state: JobStatus
    attempt: int
    start_ms: int
    published_ms: int
    vertices: tuple[VertexView, ...]
    checkpoints: CheckpointStatsSnapshot
    checkpoint_config: dict[str, Any] = field(default_factory=dict)
    restored_from: int | None = None
    max_parallelism: int | None = None
    edges: tuple[EdgeView, ...] = ()
    processes: Mapping[tuple[int, int], tuple[str, int]] = field(default_factory=dict)
    """(host, pid) of each registered stream task by (vertex id, subtask index)."""
    config: dict[str, Any] = field(default_factory=dict)
    """The job's configuration (no secrets): `/jobs/<id>/config`."""
    spark_ui: str | None = None
    """The Spark UI of the application (None when `spark.ui.enabled` is off)."""
    exceptions: tuple[FailureEntry, ...] = ()
    """The latest failures, oldest first (at most job_view.MAX_FAILURE_HISTORY)."""
    exceptions_truncated: bool = False
    """Older failures were dropped from `exceptions`."""
    restart_strategy: dict[str, Any] = field(default_factory=dict)
    """The restart strategy's settings (job_view.restart_strategy_json)."""
    log_dir: str | None = None
    """The job's log folder on the driver (cluster/log_dir.py); None: no log routes."""
