"""What a subtask is deployed with: its descriptor (the slice of the job graph it runs) and
the settings of the attempt.

The graph layer builds one `TaskDescriptor` per subtask (`graph.deployment`); the
runtime never sees the job graph. A descriptor holds plain values and the operator
factories of the subtask's chain, so it pickles to the Spark task as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from barrierflow.core.checkpointing_mode import CheckpointingMode
from barrierflow.core.state_backends import HashMapStateBackend, StateBackend
from barrierflow.runtime.barriers.handler import BarrierHandler, barrier_handler_for
from barrierflow.runtime.operators.base import DEFAULT_AUTO_WATERMARK_INTERVAL_MS, StreamOperator
from barrierflow.state.key_groups import KeyGroupRange, key_group_range_for_subtask


@dataclass(frozen=True, order=True)
class SubtaskId:
    """One parallel instance of a vertex: one Spark task, one process."""

    vertex_id: int
    subtask_index: int

    def __str__(self) -> str:
        return f"{self.vertex_id}.{self.subtask_index}"


class OperatorFactory(Protocol):
    """Makes an operator instance for a uid (a graph transformation)."""

    def make_operator(self, uid: str) -> StreamOperator: ...


@dataclass(frozen=True)
class OperatorDescriptor:
    """One operator of the chain, by uid and name, and what makes it."""

    uid: str
    name: str
    factory: OperatorFactory

    def make(self) -> StreamOperator:
        return self.factory.make_operator(self.uid)


@dataclass(frozen=True)
class InputChannelDescriptor:
    """One input channel, in gate order: the edge, the upstream subtask, the operator input."""

    edge_id: int
    upstream: SubtaskId
    operator_input: int = 0
    """Which input of the chain's first operator it feeds (1: a two-input operator's second)."""


@dataclass(frozen=True)
class OutputEdgeDescriptor:
    """One output edge: how records are partitioned, and the subtasks its channels go to."""

    edge_id: int
    partitioner: Any
    """A `Partitioner` (picks the channel of each record)."""
    targets: tuple[SubtaskId, ...]
    """The downstream subtask of each of the edge's channels, in channel order."""
    source_operator: int
    """Index in the chain of the operator that feeds the edge."""
    side_output: str | None = None
    """The OutputTag id of the side output the edge carries; None for the main output."""


@dataclass(frozen=True)
class TaskDescriptor:
    """Everything one subtask needs of the job graph."""

    subtask: SubtaskId
    vertex_name: str
    parallelism: int
    max_parallelism: int
    operators: tuple[OperatorDescriptor, ...]
    inputs: tuple[InputChannelDescriptor, ...] = ()
    outputs: tuple[OutputEdgeDescriptor, ...] = ()
    vertex_names: dict[int, str] | None = None
    """Names of the job's vertices by id, for messages about peers."""
    auto_watermark_interval_ms: int = DEFAULT_AUTO_WATERMARK_INTERVAL_MS
    job_name: str = ""
    """The job's name (`JobGraph.job_name`)."""
    job_parameters: dict[str, str] | None = None
    """The global job parameters (`JobGraph.job_parameters`)."""

    @property
    def key_group_range(self) -> KeyGroupRange:
        """The key groups this subtask owns."""
        return key_group_range_for_subtask(
            self.max_parallelism, self.parallelism, self.subtask.subtask_index
        )

    def vertex_name_of(self, subtask: SubtaskId) -> str:
        """The name of a peer's vertex (its id if unknown)."""
        return (self.vertex_names or {}).get(subtask.vertex_id, str(subtask.vertex_id))


@dataclass(frozen=True)
class TaskSettings:
    """Everything a task needs besides its descriptor; the same for all tasks of an attempt."""

    job_id: str
    attempt: int
    deployment_id: str
    secret: bytes
    jobmaster_address: tuple[str, int]
    """The JobMaster's RPC endpoint as the tasks reach it (its advertised address)."""
    task_bind_address: str | None
    """Where the task's data server listens: an address, a wildcard (0.0.0.0: every
    interface, the executor's host advertised), or None: the executor's own host."""
    checkpoint_dir: str
    """URI of this job's checkpoint folder (chk-<n> folders go below it)."""
    partitions: tuple[SubtaskId, ...]
    """Spark partition index -> subtask."""
    buffer_size: int = 1000
    buffer_timeout_ms: int = 50
    connect_timeout_s: float = 60.0
    checkpointing_mode: str = CheckpointingMode.EXACTLY_ONCE.value
    """A CheckpointingMode value."""
    unaligned_checkpoints: bool = False
    aligned_checkpoint_timeout_ms: int = 0
    """With unaligned checkpoints: align this long first (0: unaligned from the first barrier)."""
    metrics_interval_ms: int = 1000
    """How often the task sends its TaskMetricsReport (0: only when it runs and finishes)."""
    task_log_level: str = "WARNING"
    """The lowest level of the task process's Python log records sent to the JobMaster (for
    the subtask's log file; cluster/executor/task_logs.py)."""
    latency_interval_ms: int = 0
    """How often each source subtask emits a latency marker (0: never, the default; Flink's
    `metrics.latency.interval`)."""
    lineage: str = ""
    """The job's checkpoint lineage (checkpoint/lineage.py; SinkContext.lineage)."""
    state_backend: StateBackend = field(default_factory=HashMapStateBackend)
    """Where keyed operators keep their keyed state (`env.set_state_backend`)."""
    changelog_state_backend: bool = False
    """Changelog checkpoints of heap state (`env.enable_changelog_state_backend`)."""

    def barrier_handler(self, channel_count: int) -> BarrierHandler:
        """The barrier handler of a task with `channel_count` input channels."""
        return barrier_handler_for(
            CheckpointingMode(self.checkpointing_mode),
            self.unaligned_checkpoints,
            self.aligned_checkpoint_timeout_ms,
            channel_count,
        )

    @property
    def sources_unaligned(self) -> bool:
        """Sources send checkpoint barriers ahead of their queued output (unaligned, no
        aligned timeout; with a timeout the barrier goes in-band and may time out downstream)."""
        return self.unaligned_checkpoints and self.aligned_checkpoint_timeout_ms == 0
