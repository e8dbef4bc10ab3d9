"""OperatorChain: the operators of one subtask, wired output to input, and their lifecycle.

Mailbox thread only. A chain is built fresh from the task's descriptor for every
attempt (a roll-back builds a new one and restores it from the checkpoint): `open`
connects each operator to the next one or to the task's output edges, restores its
state and opens it; `close` ends it normally (operators may emit while closing),
`abort` discards uncommitted side effects. The chain also fans the task's calls out
to its operators: processing time, snapshots, checkpoint notifications; and it takes
the latency markers in (`process_latency_marker` from the input channels, records the
head's latency; `emit_latency_marker` from the source), past every operator's code.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from barrierflow import _fs
from barrierflow._clock import Clock
from barrierflow.checkpoint.handles import OperatorRestore
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.runtime.chain_inputs import ChainInputs
from barrierflow.runtime.chain_outputs import ChainingOutput, OperatorOutput, RecordWriterOutput
from barrierflow.runtime.deployment import TaskDescriptor, TaskSettings
from barrierflow.runtime.elements import LatencyMarker
from barrierflow.runtime.local_state import local_state_dir, remove_orphaned_state_dirs
from barrierflow.runtime.mailbox_executor import MailboxExecutor
from barrierflow.runtime.metrics.operator_metrics import MeteredOutput, OperatorMetrics
from barrierflow.runtime.network.record_writer import RecordWriter
from barrierflow.runtime.operators.base import (
    OperatorContext,
    OperatorSnapshot,
    Output,
    RestoredState,
    StreamOperator,
    restore_operator,
)
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.state.operator_state import decode_operator_state

log = logging.getLogger(__name__)


class OperatorChain:
    """The operators of one subtask, head first (see the module docstring)."""

    def __init__(self, descriptor: TaskDescriptor) -> None:
        self.descriptor = descriptor
        self.operators: list[StreamOperator] = [op.make() for op in descriptor.operators]
        head = self.operators[0]
        self.source: SourceOperator | None = head if isinstance(head, SourceOperator) else None
        self.inputs: ChainInputs | None = None
        """Routes the input channels into the head (None for a source)."""
        channel_inputs = [channel.operator_input for channel in descriptor.inputs]
        self.metrics = [
            OperatorMetrics(
                op.uid, op.name, len(set(channel_inputs)) if index == 0 and channel_inputs else 1
            )
            for index, op in enumerate(self.operators)
        ]
        """What each operator took in and emitted (runtime/metrics), head first."""
        self.network_outputs: list[RecordWriterOutput] = []
        """The outputs whose records leave the task (each counts them)."""
        self._now_ms: Callable[[], int] | None = None
        self._local_dir: str | None = None
        """The subtask's folder of this attempt on the task host (removed at the end)."""
        self._state = "created"

    @property
    def name(self) -> str:
        return self.descriptor.vertex_name

    def open(
        self,
        context: OperatorContext,
        writer: RecordWriter,
        restore: dict[str, OperatorRestore],
        reader: SubtaskStateReader,
    ) -> None:
        """Connect, restore (`restore` by uid; missing uids start empty) and open every
        operator, head first."""
        self._now_ms = context.processing_time
        self._local_dir = context.local_dir
        if context.local_dir is not None:  # what killed task processes left on this host
            remove_orphaned_state_dirs(Path(context.local_dir).parent)
        for operator, output in zip(self.operators, self._outputs(writer), strict=True):
            operator.setup(context, output)
            restore_operator(operator, restored_state(reader, restore.get(operator.uid)))
            operator.open()
        self._state = "open"
        channel_inputs = [channel.operator_input for channel in self.descriptor.inputs]
        if channel_inputs:
            self.inputs = ChainInputs(self.operators[0], channel_inputs, self.metrics[0])

    def records_out(self) -> int:
        """Records that left the task over its edges so far."""
        return sum(output.records for output in self.network_outputs)

    def _outputs(self, writer: RecordWriter) -> list[Output]:
        """One output per operator: the next operator or the main edges, plus side edges,
        each metered (MeteredOutput)."""
        chain, metrics = self.operators, self.metrics
        outputs: list[Output] = []
        self.network_outputs = []
        for index in range(len(chain)):
            main: Output
            last = index + 1 == len(chain)
            if not last:
                main = ChainingOutput(chain[index + 1])
            else:
                main = RecordWriterOutput(writer.edges_of(index, None))
                self.network_outputs.append(main)
            sides: dict[str, RecordWriterOutput] = {
                tag: RecordWriterOutput(writer.edges_of(index, tag))
                for tag in sorted(writer.side_outputs_of(index))
            }
            self.network_outputs.extend(sides.values())
            downstream = None if last else metrics[index + 1]
            metered = MeteredOutput(
                OperatorOutput(main, dict(sides)), metrics[index], downstream, self._now_ms
            )
            if index == 0 and self.source is not None:
                metered.counts_as_source()
            outputs.append(metered)
        return outputs

    # ---- while running -----------------------------------------------------------------------

    def process_latency_marker(self, marker: LatencyMarker) -> None:
        """A latency marker from an input channel: the head records its age, and it goes on
        past the head's code."""
        assert self._now_ms is not None, "the chain is not open"
        self.metrics[0].record_latency(marker, self._now_ms())
        self.operators[0].output.emit_latency_marker(marker)

    def emit_latency_marker(self, marker: LatencyMarker) -> None:
        """The source's latency marker, after the records it emitted so far."""
        self.operators[0].output.emit_latency_marker(marker)

    def accepts_input(self) -> bool:
        """False while any operator must not be given input (it waits for mails)."""
        return all(operator.accepts_input() for operator in self.operators)

    def fire_processing_time(self, now_ms: int) -> int | None:
        """Call every operator whose wake-up is due; the next wake-up of any, or None."""
        nearest = None
        for operator in self.operators:
            due = operator.next_wakeup()
            if due is not None and due <= now_ms:
                operator.on_processing_time(now_ms)
                due = operator.next_wakeup()
            if due is not None and (nearest is None or due < nearest):
                nearest = due
        return nearest

    def snapshot_state(
        self, checkpoint_id: int, savepoint: bool = False
    ) -> dict[str, OperatorSnapshot]:
        """Every stateful operator's snapshot at the barrier, by uid (`savepoint`: of a
        savepoint, which is written whole)."""
        snapshots = {}
        for operator in self.operators:
            snapshot = operator.snapshot_state(checkpoint_id, savepoint)
            if snapshot is not None:
                snapshots[operator.uid] = snapshot
        return snapshots

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        for operator in self.operators:
            operator.notify_checkpoint_complete(checkpoint_id)

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        for operator in self.operators:
            operator.notify_checkpoint_aborted(checkpoint_id)

    # ---- ending ------------------------------------------------------------------------------

    @property
    def is_ended(self) -> bool:
        """Closed or aborted: nothing more to do."""
        return self._state in ("closed", "aborted")

    def close(self) -> None:
        """End normally, head first: what an operator emits while closing reaches the next one
        before that one closes."""
        for operator in self.operators:
            operator.close()
        self._state = "closed"
        self._remove_local_dir()

    def abort(self) -> None:
        """Discard uncommitted side effects (once; a closed chain has none left)."""
        if self.is_ended:
            return
        self._state = "aborted"
        for operator in self.operators:
            try:
                operator.abort()
            except Exception:
                log.warning("aborting %s failed", operator.name, exc_info=True)
        self._remove_local_dir()

    def _remove_local_dir(self) -> None:
        """Delete what the operators left in the subtask's local folder (their backends
        delete their own databases; this catches one whose dispose failed)."""
        if self._local_dir is not None:
            shutil.rmtree(self._local_dir, ignore_errors=True)


def restored_state(
    reader: SubtaskStateReader, restore: OperatorRestore | None
) -> RestoredState | None:
    """What one operator restores, read from the checkpoint's state files (None: nothing)."""
    if restore is None:
        return None
    # Every keyed and timers section of one restore comes from one checkpoint's state
    # files, which sit in its folder.
    files = restore.keyed or restore.timers
    base = _fs.location(files[0][0]).parent if files else None
    return RestoredState(
        keyed=[reader.slice(uri, off, length) for uri, off, length in restore.keyed],
        operator=[
            (old, decode_operator_state(reader.slice(uri, off, length)))
            for old, uri, off, length in restore.operator
        ],
        timers=[reader.slice(uri, off, length) for uri, off, length in restore.timers],
        base=base,
    )


def operator_context(
    descriptor: TaskDescriptor,
    settings: TaskSettings,
    clock: Clock,
    mailbox: MailboxExecutor,
    restored_checkpoint_id: int | None = None,
    abandoned_above: int | None = None,
) -> OperatorContext:
    """What every operator of one subtask's chain is set up with, for one attempt that
    restored `restored_checkpoint_id` (None: a fresh start), abandoning the commits of its
    lineage above `abandoned_above`."""
    backend = settings.state_backend
    return OperatorContext(
        subtask_index=descriptor.subtask.subtask_index,
        parallelism=descriptor.parallelism,
        max_parallelism=descriptor.max_parallelism,
        key_group_range=descriptor.key_group_range,
        attempt=settings.attempt,
        deployment_id=settings.deployment_id,
        processing_time=clock.epoch_millis,
        clock=clock,
        auto_watermark_interval_ms=descriptor.auto_watermark_interval_ms,
        mailbox=mailbox,
        job_name=descriptor.job_name,
        job_parameters=descriptor.job_parameters or {},
        restored_checkpoint_id=restored_checkpoint_id,
        lineage=settings.lineage,
        abandoned_above=abandoned_above,
        state_backend=backend,
        changelog_state_backend=settings.changelog_state_backend,
        local_dir=str(local_state_dir(backend, settings.deployment_id, descriptor.subtask)),
    )
