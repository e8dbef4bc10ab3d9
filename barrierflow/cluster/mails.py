"""The JobMaster's mails: what other threads hand to the JobMaster thread.

RPC reader threads post a task's message or its lost connection, the Spark runner
posts the start of an attempt's Spark tasks and the end of its Spark job, the JobClient
posts a cancel request (and, for `barrierflow chaos`, a failure to inject), any caller of
the job's actions (job_actions.py) posts a savepoint or stop with savepoint. Each
mail is a frozen value dispatched by type; one that names an attempt carries its
number, so the JobMaster refuses what belongs to an older attempt (a zombie).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from barrierflow.graph.job_graph import SubtaskId


class TaskConnection(Protocol):
    """The JobMaster's end of one task's RPC connection (a multiprocessing Connection)."""

    def send(self, message: Any) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True, eq=False)
class TaskMessageReceived:
    """A task sent `message` (one of task_messages.TASK_TO_JOBMASTER; it carries its attempt)."""

    conn: TaskConnection
    message: Any


@dataclass(frozen=True, eq=False)
class TaskConnectionLost:
    """A task's RPC connection ended: the task finished, was cancelled, or its process died."""

    conn: TaskConnection


@dataclass(frozen=True)
class SparkJobEnded:
    """The Spark job of `attempt` ended; `error` is the useful part of its failure, or None."""

    attempt: int
    error: str | None


@dataclass(frozen=True)
class SparkTasksLaunched:
    """Spark started every task of `attempt`'s barrier stage (it had waited for that many free
    task slots): from now on the tasks start their Python workers and register."""

    attempt: int


@dataclass(frozen=True)
class CancelRequested:
    """The user (JobClient.cancel) asked the job to stop."""

    reason: str


@dataclass(frozen=True)
class FailureInjectionRequested:
    """`barrierflow chaos` (JobClient.inject_failure) asks that subtask `subtask` of attempt
    `attempt` fail as a user function would; refused if that attempt is no longer current.
    `arm` (cluster/chaos_faults.py): "restore" or "storage" also arms that failure for the
    restore of the attempt that follows; "" arms nothing."""

    attempt: int
    subtask: SubtaskId
    reason: str
    arm: str = ""


@dataclass(frozen=True)
class SavepointRequested:
    """A savepoint into `target_dir` (None: the job's default) was asked for under
    `trigger_id`; with `stop`, a stop with savepoint (`drain`: event time to the end first)."""

    trigger_id: str
    target_dir: str | None
    stop: bool = False
    drain: bool = False


Mail = (
    TaskMessageReceived
    | TaskConnectionLost
    | SparkJobEnded
    | CancelRequested
    | FailureInjectionRequested
    | SavepointRequested
)
"""Everything the JobMaster's mailbox holds."""
