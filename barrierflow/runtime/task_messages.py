"""The messages between a StreamTask and the JobMaster.

They travel pickled over an authenticated connection; every task message
carries the deployment attempt, and the JobMaster drops those of other attempts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from barrierflow.connectors.base import SourceSplit

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
    state_handle: dict[str, Any] | None
    """Where this subtask's state file is and what it holds (see StateHandle in task.py)."""
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
class TaskFailed:
    attempt: int
    partition: int
    error: str
    """The formatted exception, shown in the job's error."""


# ---- JobMaster -> task -----------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorRestore:
    """What one operator restores from: its files in the checkpoint."""

    keyed: list[tuple[str, int, int]] = field(default_factory=list)
    """(file URI, offset, length) of each keyed snapshot overlapping this subtask."""
    operator: list[tuple[int, str, int, int]] = field(default_factory=list)
    """(old subtask index, file URI, offset, length) of every old subtask's operator state."""
    timers: list[tuple[str, int, int]] = field(default_factory=list)
    """(file URI, offset, length) of each timer snapshot overlapping this subtask."""


@dataclass(frozen=True)
class DeployTask:
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


@dataclass(frozen=True)
class TriggerCheckpoint:
    checkpoint_id: int
    timestamp: int
    is_final: bool
    is_savepoint: bool = False
    """A savepoint: its barriers are always aligned."""


@dataclass(frozen=True)
class NotifyCheckpointComplete:
    checkpoint_id: int
    is_final: bool


@dataclass(frozen=True)
class NotifyCheckpointAborted:
    checkpoint_id: int


@dataclass(frozen=True)
class CancelTask:
    reason: str
