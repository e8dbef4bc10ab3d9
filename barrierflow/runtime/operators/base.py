"""The contract between a task and the operators of its chain.

Operators work on batches: a task hands each operator a `RecordBatch` and the
operator pushes what it produces into its `output`, so Python pays one call per
batch, not per record. Watermarks and stream statuses reach an operator in order
with the records, after every record that preceded them; the operator may emit
records (timers firing) before it passes the watermark on. All methods run on the
task's mailbox thread.

One-input operator (map, keyed process, sinks)::

    process_batch(batch)            records; emit with output.collect(RecordBatch(...))
    process_watermark(watermark)    default: output.emit_watermark(watermark)
    process_stream_status(status)   default: output.emit_stream_status(status)

Two-input operator (connect, joins): `TwoInputStreamOperator` with
`process_batch1/2`, and `process_watermark1/2` / `process_stream_status1/2`, which by
default combine the inputs (`IndexedCombinedWatermarkStatus`) and call
`process_watermark` with the minimum, as Flink's AbstractStreamOperator does.

Side outputs: `output.collect_side(tag_id, batch)`. Processing time: the operator
reads `context.processing_time()` and asks the task for a wake-up with
`next_wakeup()`; the task calls `on_processing_time(now)` once it is due.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.core.metrics import MetricGroup
from barrierflow.core.state_backends import HashMapStateBackend, StateBackend
from barrierflow.errors import (
    CheckpointStorageError,
    ExternalSystemUnavailableError,
    StateRestoreError,
)
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.combined_watermark import IndexedCombinedWatermarkStatus
from barrierflow.runtime.elements import LatencyMarker, StreamStatus, Watermark
from barrierflow.runtime.mailbox_executor import NO_MAILBOX, MailboxExecutor
from barrierflow.state.key_groups import KeyGroupRange

if TYPE_CHECKING:
    from barrierflow.runtime.timers import TimerSnapshot
    from barrierflow.state.backend import KeyedStateSnapshot

DEFAULT_AUTO_WATERMARK_INTERVAL_MS = 200
"""Flink's default `pipeline.auto-watermark-interval`."""


def _no_processing_time() -> int:
    raise RuntimeError("this operator context has no processing-time clock")


@dataclass(frozen=True)
class OperatorContext:
    """Where an operator runs."""

    subtask_index: int
    parallelism: int
    max_parallelism: int
    key_group_range: KeyGroupRange
    attempt: int
    deployment_id: str
    processing_time: Callable[[], int] = field(default=_no_processing_time, compare=False)
    """The task's processing-time clock: epoch milliseconds (a manual clock in tests)."""
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False)
    """The task's clock itself (`processing_time` is its `epoch_millis`): handed on to what
    reads time for an operator, e.g. a sink's writer (`SinkContext.clock`)."""
    auto_watermark_interval_ms: int = DEFAULT_AUTO_WATERMARK_INTERVAL_MS
    """How often periodic watermark generators are asked for a watermark."""
    mailbox: MailboxExecutor = field(default=NO_MAILBOX, compare=False)
    """Hands actions from other threads to the task's mailbox thread (async I/O completions)."""
    job_name: str = ""
    """The job's name, stable across attempts and reruns (sinks name transactions by it)."""
    job_parameters: dict[str, str] = field(default_factory=dict, compare=False)
    """The global job parameters (`RuntimeContext.get_job_parameter`)."""
    restored_checkpoint_id: int | None = None
    """The checkpoint or savepoint this attempt restored; None on a fresh start."""
    lineage: str = ""
    """The job's checkpoint lineage (connectors.base.SinkContext.lineage); "" unknown."""
    abandoned_above: int | None = None
    """Commits of this lineage above this checkpoint id are abandoned by this restore
    (connectors.base.SinkContext.abandoned_above); None on a fresh start."""
    state_backend: StateBackend = field(default_factory=HashMapStateBackend)
    """Where keyed operators keep their keyed state (`env.set_state_backend`)."""
    changelog_state_backend: bool = False
    """Changelog checkpoints of heap state (`env.enable_changelog_state_backend`)."""
    local_dir: str | None = None
    """This subtask's own folder on the task host for this attempt (on-disk state: one
    subfolder per operator); None: each on-disk backend makes a temporary folder."""


class Output(Protocol):
    """Where an operator sends what it produces: the next operator, or the task's edges."""

    def collect(self, batch: RecordBatch) -> None:
        """Records of the main output."""

    def collect_side(self, tag_id: str, batch: RecordBatch) -> None:
        """Records of the side output `tag_id` (dropped if nothing consumes it)."""

    def emit_watermark(self, watermark: Watermark) -> None:
        """Event time has reached `watermark` for everything emitted after this."""

    def emit_stream_status(self, status: StreamStatus) -> None:
        """The operator's output went IDLE or came back ACTIVE."""

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        """A latency marker passing by (the chain's outputs forward it; operators never see
        one and need not call this)."""


@dataclass(frozen=True)
class OperatorSnapshot:
    """The synchronous part of an operator's snapshot: already a copy, safe to upload later."""

    keyed: bytes | KeyedStateSnapshot | None = None
    """Keyed state: a backend's `KeyedStateSnapshot` (written and released by the snapshot
    uploader, `runtime/snapshot_uploader.py`), or an encoded "keyed-state" section."""
    operator: Any = None
    """msgpack-able operator state (source positions, sink transactions), or None."""
    timers: bytes | TimerSnapshot | None = None
    """A timer-service snapshot: the timers copied at the barrier (`TimerSnapshot`, encoded
    by the snapshot uploader), or its "timers" envelope; None: no timers."""


@dataclass
class RestoredState:
    """What a checkpoint holds for one operator, for one new subtask.

    `keyed` holds the keyed snapshots whose key-group range overlaps this subtask's;
    `operator` holds every old subtask's operator state as (old index, state), so the
    operator picks what is its own (sources take the union, sinks their share);
    `timers` holds the timer snapshots whose key-group range overlaps this subtask's;
    `base` is the folder of the checkpoint `keyed` and `timers` were read from, against
    which a keyed section's native files and a changelog's shared files resolve (None: no
    such sections, or not from storage).
    """

    keyed: list[bytes] = field(default_factory=list)
    operator: list[tuple[int, Any]] = field(default_factory=list)
    timers: list[bytes] = field(default_factory=list)
    base: _fs.Location | None = None


class StreamOperator:
    """One operator of a chain with one input. Subclasses override what they need."""

    def __init__(self, uid: str, name: str) -> None:
        self.uid = uid
        self.name = name
        self.context: OperatorContext | None = None
        self.output: Output = _UNCONNECTED

    def setup(self, context: OperatorContext, output: Output) -> None:
        self.context = context
        self.output = output

    @property
    def metric_group(self) -> MetricGroup:
        """The user metrics of this operator's functions (`get_metrics_group()`), which the
        task reports; made on first use."""
        group = self.__dict__.get("_metric_group")
        if group is None:
            group = self.__dict__["_metric_group"] = MetricGroup()
        return group

    def initialize_state(self, restored: RestoredState | None) -> None:
        """Restore from a checkpoint (None: fresh start). Called once, before `open`."""

    def open(self) -> None:
        """Start user functions; runs after state is restored."""

    def process_batch(self, batch: RecordBatch) -> None:
        raise NotImplementedError

    def process_watermark(self, watermark: Watermark) -> None:
        """Event time reached `watermark`: fire what is due, then pass it on."""
        self.output.emit_watermark(watermark)

    def process_stream_status(self, status: StreamStatus) -> None:
        """The input went IDLE or came back ACTIVE; by default the output follows it."""
        self.output.emit_stream_status(status)

    def accepts_input(self) -> bool:
        """False while this operator must not be given input (e.g. its async queue is full);
        the task then only handles mails until it accepts again, and does not finish."""
        return True

    def next_wakeup(self) -> int | None:
        """When (processing time, ms) the task should call `on_processing_time`; None: never."""
        return None

    def on_processing_time(self, now_ms: int) -> None:
        """Processing time reached `now_ms` (at or after `next_wakeup()`)."""

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> OperatorSnapshot | None:
        """Copy this operator's state at the barrier of `checkpoint_id` (None: stateless);
        `savepoint`: a savepoint's barrier (its state is written whole, never as a delta)."""
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` is durable: commit side effects up to it."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` will never complete."""

    def close(self) -> None:
        """The job ended normally."""

    def abort(self) -> None:
        """The task is failing or cancelled: discard uncommitted side effects."""


def restore_operator(operator: StreamOperator, restored: RestoredState | None) -> None:
    """`operator.initialize_state(restored)`, where any failure while it restores state is
    a `StateRestoreError` raised from it.

    Whatever the original type (a sink that cannot commit a staged file it restored, a
    user function's `initialize_state`), a failure at restore then reaches the JobMaster's
    rule for them (cluster/jobmaster/restore_point.py: one retry through the restart strategy, the
    same failure twice at one restore point fails the job) instead of only the restart
    strategy, which may loop for long. Errors that already are restore errors keep their
    type and the file they name, and an unreachable external system stays an
    ExternalSystemUnavailableError (transient: restarts wait for it); a fresh start
    (`restored` None) changes nothing.
    """
    if restored is None:
        operator.initialize_state(None)
        return
    try:
        operator.initialize_state(restored)
    except (StateRestoreError, CheckpointStorageError, ExternalSystemUnavailableError):
        raise  # an unreachable database or broker is transient: the restart strategy decides
    except Exception as error:
        raise StateRestoreError(
            f"{operator.name} ({operator.uid}) failed while restoring its state: "
            f"{type(error).__name__}: {error}"
        ) from error


class TwoInputStreamOperator(StreamOperator):
    """An operator with two inputs (connect, joins); heads a chain.

    Each input's watermark and status arrive already merged over that input's channels;
    by default they are combined here and `process_watermark` sees the minimum.
    Override `process_watermark1/2` to act on one input's watermark (an interval join
    might); call the base method to keep the combination.
    """

    def setup(self, context: OperatorContext, output: Output) -> None:
        super().setup(context, output)
        self.combined_watermark = IndexedCombinedWatermarkStatus(2, _CombinedInputs(self))

    def process_batch(self, batch: RecordBatch) -> None:
        raise TypeError(f"{self.name} has two inputs: use process_batch1/2")

    def process_batch1(self, batch: RecordBatch) -> None:
        raise NotImplementedError

    def process_batch2(self, batch: RecordBatch) -> None:
        raise NotImplementedError

    def process_watermark1(self, watermark: Watermark) -> None:
        self.combined_watermark.input_watermark(watermark, 0)

    def process_watermark2(self, watermark: Watermark) -> None:
        self.combined_watermark.input_watermark(watermark, 1)

    def process_stream_status1(self, status: StreamStatus) -> None:
        self.combined_watermark.input_stream_status(status, 0)

    def process_stream_status2(self, status: StreamStatus) -> None:
        self.combined_watermark.input_stream_status(status, 1)


class _CombinedInputs:
    """Feeds what the combination of a two-input operator's inputs decides back to it."""

    def __init__(self, operator: StreamOperator) -> None:
        self._operator = operator

    def emit_watermark(self, watermark: Watermark) -> None:
        self._operator.process_watermark(watermark)

    def emit_stream_status(self, status: StreamStatus) -> None:
        self._operator.process_stream_status(status)


class _Unconnected:
    def _fail(self, *args: Any) -> None:
        raise RuntimeError("operator used before setup() connected its output")

    collect = collect_side = emit_watermark = emit_stream_status = emit_latency_marker = _fail


_UNCONNECTED: Output = _Unconnected()
