"""The messages between a StreamTask and the JobMaster.

They travel pickled over an authenticated connection. Every message, in both
directions, carries the deployment attempt it belongs to: each side refuses a
message of another attempt by its number (zombies of an older attempt cannot
touch a newer one), and a message of a type it does not know is an error on
both sides, never silently dropped.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from barrierflow.checkpoint.handles import OperatorRestore, SubtaskStateHandle
from barrierflow.connectors.base import SourceSplit
from barrierflow.errors import (
    ChannelLostError,
    ChaosFailure,
    ConnectionSetupError,
    ExternalSystemUnavailableError,
)

if TYPE_CHECKING:
    from barrierflow.runtime.deployment import TaskSettings

# ---- task -> JobMaster -----------------------------------------------------------------------


@dataclass(frozen=True)
class RegisterTask:
    attempt: int
    partition: int
    """The Spark partition index, which names the subtask."""
    data_address: tuple[str, int]
    host: str
    pid: int


@dataclass(frozen=True)
class TaskRunning:
    """Channels are connected and state restored: the task can take checkpoints."""

    attempt: int
    partition: int


@dataclass(frozen=True)
class AcknowledgeCheckpoint:
    attempt: int
    partition: int
    checkpoint_id: int
    state_handle: SubtaskStateHandle | None
    """Where this subtask's state file is and what it holds; None: the subtask has no state."""
    sync_ms: float = 0.0
    """Snapshotting the operators on the mailbox thread."""
    async_ms: float = 0.0
    """Writing the state file on the upload thread."""
    state_bytes: int = 0
    alignment_ms: float = 0.0
    """From the first to the last barrier of this checkpoint at the task's inputs (0: sources,
    single inputs)."""
    start_delay_ms: float = 0.0
    """From the trigger (the barrier's timestamp, wall clock) to the first barrier reaching
    this task (for a source: the trigger message reaching it); clamped at 0."""
    persisted_bytes: int = 0
    """In-flight data written with the snapshot (unaligned checkpoints; 0 when aligned)."""
    unaligned: bool = False
    """The snapshot was taken unaligned (at the first barrier, with in-flight data)."""
    shared_files: tuple[tuple[str, int, bool], ...] = ()
    """Incremental checkpoints: every shared file the subtask's state references, as (name
    relative to the job folder, size, uploaded for this checkpoint)."""
    checkpointed_bytes: int | None = None
    """Uploaded for this checkpoint: the state file and the new shared files (None: all of
    `state_bytes`, which counts every referenced shared file too)."""


@dataclass(frozen=True)
class DeclineCheckpoint:
    attempt: int
    partition: int
    checkpoint_id: int
    reason: str
    """A CheckpointFailureReason name."""
    message: str = ""


@dataclass(frozen=True)
class EndOfInput:
    """This source subtask has read all its splits."""

    attempt: int
    partition: int


@dataclass(frozen=True)
class TaskFinished:
    attempt: int
    partition: int


@dataclass(frozen=True)
class TaskFailure:
    """Why a task failed, in a form that survives the trip to the driver.

    The JobMaster shows the original exception first (type and message), with the
    remote traceback attached, and re-raises it as the cause of the job's error
    when it can be unpickled there.
    """

    type_name: str
    """The exception's qualified class name, e.g. "builtins.ZeroDivisionError"."""
    message: str
    traceback: str
    """The task-side traceback, formatted."""
    where: str
    """The operator chain that raised it, e.g. "words -> Map"."""
    lost_peer: bool = False
    """A secondary failure: the task lost a channel because a peer failed."""
    pickled: bytes | None = None
    """The exception itself (cloudpickle), None if it could not be pickled."""
    position: str | None = None
    """Where in the input it happened, when the task knows: the source split and offset of
    the batch a user function chained to the source was processing."""
    transient: bool = False
    """Not a property of the input: injected by chaos, a lost channel, or an unreachable
    system or file (OSError), itself or an error it was raised from; never counted as a repeated
    failure of the same record (cluster/jobmaster/repeated_failures.py)."""

    @classmethod
    def of(cls, error: BaseException, where: str, position: str | None = None) -> TaskFailure:
        """Capture `error` (raised in chain `where`, at input `position`) for the JobMaster."""
        from pyspark import cloudpickle

        try:
            pickled: bytes | None = cloudpickle.dumps(error)
        except Exception:
            pickled = None
        kind = type(error)
        return cls(
            type_name=f"{kind.__module__}.{kind.__qualname__}",
            message=str(error),
            traceback="".join(traceback.format_exception(error)).rstrip(),
            where=where,
            lost_peer=isinstance(error, ChannelLostError),
            pickled=pickled,
            position=position,
            transient=_is_transient(error),
        )

    @property
    def headline(self) -> str:
        """`ZeroDivisionError: division by zero`: the type's short name and the message."""
        short = self.type_name.rsplit(".", 1)[-1]
        return f"{short}: {self.message}" if self.message else short


TRANSIENT_ERRORS = (
    ChaosFailure,
    ChannelLostError,
    ConnectionSetupError,
    ExternalSystemUnavailableError,
    OSError,
)
"""Failures that say nothing about the input: they may not happen again at the same record."""


def _is_transient(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from (`raise ... from`), is one of
    TRANSIENT_ERRORS."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, TRANSIENT_ERRORS):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


@dataclass(frozen=True)
class TaskFailed:
    attempt: int
    partition: int
    failure: TaskFailure


@dataclass(frozen=True)
class TaskProcessDied:
    """The stream task's process died while its Spark task lives (sent by the Spark task,
    which supervises it): the job rolls back in place and the Spark task starts a new
    process for the next attempt."""

    attempt: int
    partition: int
    pid: int
    """The process that died (the one its RegisterTask named)."""
    how: str
    """What ended it, e.g. "was killed by SIGKILL" or "exited with code 1"."""


@dataclass(frozen=True)
class SparkTaskProcess:
    """The Spark task's own process (the Python worker that supervises the stream task's
    process): losing it loses the Spark task. Sent after each RegisterTask."""

    attempt: int
    partition: int
    host: str
    pid: int


@dataclass(frozen=True)
class TaskMetricsReport:
    """The task's metrics heartbeat: sent when it runs, then every `TaskSettings
    .metrics_interval_ms`, and once more as it finishes. `values` are cumulative totals in
    plain types (runtime/metrics/task_metrics.py lists them); the JobMaster's MetricsStore
    turns successive reports into rates."""

    attempt: int
    partition: int
    time_ms: int
    """The task's wall clock when it read the values (watermark lag is measured from it)."""
    values: dict[str, Any]


@dataclass(frozen=True)
class TaskLogRecord:
    """One Python log record of a task's process, in plain values."""

    time_ms: int
    level: str
    """The level's name, e.g. "WARNING"."""
    logger: str
    message: str
    attempt: int
    """The attempt the task ran when it logged this."""
    exception: str = ""
    """The formatted traceback of a record logged with one."""


@dataclass(frozen=True)
class TaskLogRecords:
    """A batch of the task process's log records (cluster/executor/task_logs.py), for the subtask's
    log file in the job's log folder. The JobMaster takes them whatever the attempt: they
    describe the subtask, and a failed attempt's last words matter most."""

    attempt: int
    partition: int
    records: tuple[TaskLogRecord, ...]
    dropped: int = 0
    """Records the task dropped since the previous batch (it logged faster than it sent)."""


@dataclass(frozen=True)
class TaskConsoleOutput:
    """Whole lines the task's process wrote to its standard output (print sinks, a user's
    `print`; cluster/executor/task_console.py), for the driver's console. The JobMaster takes
    them whatever the attempt: they were printed (print output is at-least-once)."""

    attempt: int
    partition: int
    text: str


# ---- JobMaster -> task -----------------------------------------------------------------------


@dataclass(frozen=True)
class DeployTask:
    attempt: int
    peers: dict[int, tuple[str, int]]
    """Data address of every partition of this attempt."""
    splits: list[SourceSplit]
    """Source splits of this subtask (sources only)."""
    restore_checkpoint_id: int | None
    restore: dict[str, OperatorRestore]
    """By operator uid; missing uids start empty."""
    channel_state: tuple[str, int, int] | None = None
    """(file URI, offset, length) of this subtask's channel state to replay (unaligned
    checkpoints), or None."""
    abandoned_above: int | None = None
    """Commits of the job's lineage above this checkpoint id belong to checkpoints this
    restore abandons (SinkContext.abandoned_above); None on a fresh start."""
    fail_restore: str | None = None
    """`barrierflow chaos` (kind restore): raise ChaosFailure(this) while restoring."""
    read_faults: int = 0
    """`barrierflow chaos` (kind storage): so many transient faults on this task's next
    state-file reads while it restores, which the read retries absorb."""


@dataclass(frozen=True)
class TriggerCheckpoint:
    attempt: int
    checkpoint_id: int
    timestamp: int
    is_final: bool
    is_savepoint: bool = False
    """A savepoint: its barriers are always aligned."""
    target: str | None = None
    """A savepoint's folder (URI): its barrier carries it, so every task writes its state file
    of this checkpoint there; None: `chk-<n>/` below the job's checkpoint folder."""


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    attempt: int
    checkpoint_id: int
    is_final: bool


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    attempt: int
    checkpoint_id: int


@dataclass(frozen=True)
class CancelTask:
    """End the attempt and the task's process (its Spark task returns)."""

    attempt: int
    reason: str


@dataclass(frozen=True)
class EndAttempt:
    """End the attempt but keep the process: the job rolls back in place. A RestartTask (or
    a CancelTask) follows within `restart_delay_ms`, the restart strategy's delay."""

    attempt: int
    reason: str
    restart_delay_ms: int


@dataclass(frozen=True)
class RestartTask:
    """Run attempt `attempt` in this process: register again under the new number, then be
    deployed and restored from the latest completed checkpoint as any attempt is."""

    attempt: int
    """The new attempt's number (`settings.attempt`), above the task's ended attempt."""
    settings: TaskSettings


@dataclass(frozen=True)
class StopSources:
    """Stop with savepoint (source tasks only): the source stops reading and reports
    EndOfInput, so the final checkpoint (a savepoint) follows. With `drain` it ends its input
    as a bounded source does (MAX_WATERMARK: windows and event-time timers fire first);
    without, it just stops emitting. A source that already ended ignores it."""

    attempt: int
    drain: bool


@dataclass(frozen=True)
class InjectFailure:
    """Fail now, as a user function that raises would (`barrierflow chaos`): the task raises
    `ChaosFailure(reason)` on its mailbox thread and reports it as its failure."""

    attempt: int
    reason: str


TASK_TO_JOBMASTER = (
    RegisterTask,
    TaskRunning,
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    EndOfInput,
    TaskFinished,
    TaskFailed,
    TaskProcessDied,
    SparkTaskProcess,
    TaskMetricsReport,
    TaskLogRecords,
    TaskConsoleOutput,
)
"""Every message a task sends; the JobMaster refuses any other type."""

JOBMASTER_TO_TASK = (
    DeployTask,
    TriggerCheckpoint,
    NotifyCheckpointComplete,
    NotifyCheckpointAborted,
    CancelTask,
    EndAttempt,
    RestartTask,
    InjectFailure,
    StopSources,
)
"""Every message the JobMaster sends; a task refuses any other type."""
