"""StreamTask: one subtask, one process, one single-threaded mailbox loop.

Everything that happens to a task arrives as a mail in one queue: records and
events from input channels, credit from output channels, and messages from
the JobMaster. Helper threads only read sockets and write snapshot files.
The loop takes mails, fires what is due in processing time (timers, periodic
watermarks), then does one unit of work (a source batch or an input element),
and flushes output buffers when the buffer timeout has passed.

Event time: each input of the chain's first operator has a StatusWatermarkValve
over its channels; what a valve decides goes into the chain as a watermark or a
status, in order with the records, and leaves the task on every output edge. A
channel that ended counts as MAX_WATERMARK.

Checkpoints: the job's checkpointing settings pick the barrier handler
(`barrier_handler_for`): aligned exactly-once, at-least-once (never blocks), or
unaligned (optionally after an aligned timeout). For unaligned checkpoints the
task announces every barrier the moment its frame arrives, takes the snapshot
at the first one, sends the barrier ahead of its queued output, and persists the
overtaken output and the input that arrives before each channel's barrier as
channel state (`channel_state.ChannelStateWriter`) in the same state file; it
acknowledges once the last channel's barrier arrived. A restored task re-sends
its output channel state and puts its input channel state at the head of its
input channels before anything new.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow.api.checkpoint_config import CheckpointingMode
from barrierflow.checkpoint import format as state_format
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.errors import BarrierflowError, ChannelLostError, StreamCorruptionError
from barrierflow.graph.job_graph import JobGraph, SubtaskId
from barrierflow.runtime.barriers.decisions import (
    AbortCheckpoint,
    ArmAlignmentTimer,
    ChannelStateComplete,
    TriggerCheckpoint,
    TriggerUnaligned,
)
from barrierflow.runtime.barriers.handler import BarrierHandler, barrier_handler_for
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_inputs import ChainInputs
from barrierflow.runtime.chain_outputs import ChainingOutput, OperatorOutput, RecordWriterOutput
from barrierflow.runtime.channel_state import (
    ChannelStateSnapshot,
    ChannelStateWriter,
    in_flight_input,
    is_channel_state_frame,
    read_channel_state,
)
from barrierflow.runtime.elements import (
    END_OF_PARTITION,
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    StreamStatus,
    Watermark,
)
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.channels import (
    ChannelHello,
    DataServer,
    OutputChannel,
    connect_output,
)
from barrierflow.runtime.network.input_gate import InputGate
from barrierflow.runtime.network.record_writer import EdgeWriter, RecordWriter
from barrierflow.runtime.operators.base import (
    OperatorContext,
    Output,
    RestoredState,
    StreamOperator,
)
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import (
    JOBMASTER_TO_TASK,
    AcknowledgeCheckpoint,
    CancelTask,
    DeclineCheckpoint,
    DeployTask,
    EndOfInput,
    NotifyCheckpointAborted,
    NotifyCheckpointComplete,
    RegisterTask,
    TaskFailed,
    TaskFailure,
    TaskFinished,
    TaskRunning,
)
from barrierflow.runtime.task_messages import (
    TriggerCheckpoint as TriggerMessage,
)
from barrierflow.state.key_groups import key_group_range_for_subtask
from barrierflow.state.operator_state import decode_operator_state, encode_operator_state

log = logging.getLogger(__name__)

SUBTASK_STATE = "subtask-state"
"""Envelope kind of the one state file a subtask writes per checkpoint."""


@dataclass(frozen=True)
class TaskSettings:
    """Everything a task needs besides the job graph; the same for all tasks of an attempt."""

    job_id: str
    attempt: int
    deployment_id: str
    secret: bytes
    jobmaster_address: tuple[str, int]
    bind_host: str
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


def epoch_millis() -> int:
    """The production processing-time clock: wall-clock epoch milliseconds.

    Processing-time timers are epoch timestamps (as in Flink), so this is the one
    wall clock of the runtime; tests inject a manual one into StreamTask.
    """
    return time.time_ns() // 1_000_000


class TaskCancelled(Exception):
    """The JobMaster cancelled this task, or is gone."""


class StreamTask:
    """Runs one subtask until the job finishes, is cancelled, or fails."""

    def __init__(
        self,
        graph: JobGraph,
        settings: TaskSettings,
        partition: int,
        send_rpc: Callable[[Any], None],
        mailbox: queue.SimpleQueue,
        clock: Callable[[], float] = time.monotonic,
        processing_time: Callable[[], int] = epoch_millis,
    ) -> None:
        self.graph = graph
        self.settings = settings
        self.partition = partition
        self.subtask = settings.partitions[partition]
        self.vertex = graph.vertex(self.subtask.vertex_id)
        self._send_rpc = send_rpc
        self.mailbox = mailbox
        self._clock = clock
        self._processing_time = processing_time
        self._next_wakeup_ms: int | None = None
        self._first_barrier: dict[int, tuple[float, int]] = {}
        """Checkpoint id -> (clock(), processing_time()) when its first barrier arrived."""
        self._newest_barrier_id = -1
        inputs = graph.input_channels(self.subtask)
        self._input_names = inputs
        self.gate = InputGate(len(inputs))
        self.barriers: BarrierHandler | None = (
            settings.barrier_handler(len(inputs)) if inputs else None
        )
        self._unaligner = (
            self.barriers if isinstance(self.barriers, CheckpointBarrierUnaligner) else None
        )
        self.channel_state = ChannelStateWriter(len(inputs), 0)
        self._held: dict[int, _HeldSnapshot] = {}
        """Unaligned checkpoints whose snapshot waits for the channel state to complete."""
        self._alignment_timers: dict[int, int] = {}
        """Checkpoint id -> processing time (ms) its alignment times out."""
        self._ended_channels: set[int] = set()
        self._output_targets: list[SubtaskId] = []
        """The downstream subtask of every output channel, in channel order."""
        self.chain: list[StreamOperator] = [op.make_operator() for op in self.vertex.operators]
        self.source = self.chain[0] if isinstance(self.chain[0], SourceOperator) else None
        self.writer = RecordWriter([])
        self.uploader = SnapshotUploader(self._send)
        self._server: DataServer | None = None
        self._finished = False
        self._cancelled: str | None = None
        self._source_exhausted = False
        self._source_waiting = False
        self._last_flush = clock()
        self._channel_inputs = graph.input_channel_inputs(self.subtask)
        self._inputs: ChainInputs | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    def run(self) -> None:
        settings = self.settings
        try:
            self._server = DataServer(
                settings.bind_host,
                settings.secret,
                settings.job_id,
                settings.attempt,
                (self.subtask.vertex_id, self.subtask.subtask_index),
                {
                    (edge_id, (up.vertex_id, up.subtask_index)): index
                    for index, (edge_id, up) in enumerate(self._input_names)
                },
                self.mailbox.put,
            )
            self._server.start()
            self._send(
                RegisterTask(
                    settings.attempt,
                    self.partition,
                    self._server.address,
                    socket.gethostname(),
                    os.getpid(),
                )
            )
            deploy = self._wait_until(lambda: self._deploy is not None, "deployment")
            self._deploy_and_restore(deploy)
            self._wait_until(lambda: self.gate.all_connected, "input channels")
            self._send(TaskRunning(settings.attempt, self.partition))
            self._loop()
            if self._finished:
                self._finish()
        except TaskCancelled:
            self._abort()
        except Exception as error:
            self._abort()
            if not self._report_failure(error):
                raise  # the JobMaster is unreachable: let Spark carry the cause
        finally:
            self._close_network()

    _deploy: DeployTask | None = None

    def _wait_until(self, condition: Callable[[], bool], what: str) -> Any:
        deadline = self._clock() + self.settings.connect_timeout_s
        while not condition():
            if self._clock() > deadline:
                raise BarrierflowError(
                    f"task {self.vertex.name} ({self.subtask}) waited "
                    f"{self.settings.connect_timeout_s:.0f} s for its {what}"
                )
            with contextlib.suppress(queue.Empty):
                self._handle(self.mailbox.get(timeout=0.1))
        return self._deploy

    def _deploy_and_restore(self, deploy: DeployTask) -> None:
        settings, vertex = self.settings, self.vertex
        context = OperatorContext(
            subtask_index=self.subtask.subtask_index,
            parallelism=vertex.parallelism,
            max_parallelism=self.graph.max_parallelism,
            key_group_range=key_group_range_for_subtask(
                self.graph.max_parallelism, vertex.parallelism, self.subtask.subtask_index
            ),
            attempt=settings.attempt,
            deployment_id=settings.deployment_id,
            processing_time=self._processing_time,
            auto_watermark_interval_ms=self.graph.auto_watermark_interval_ms,
            mailbox=_TaskMailboxExecutor(self.mailbox.put),  # [mailbox-contract]
        )
        self._context = context
        if self.source is not None:
            self.source.assign_splits(deploy.splits)
        self.writer = self._connect_outputs(deploy)
        self.channel_state = ChannelStateWriter(self.gate.channel_count, len(self.writer.channels))
        files = _StateFiles()
        if deploy.channel_state is not None:
            self._restore_channel_state(files, deploy.channel_state)
        for operator, output in zip(self.chain, self._chain_outputs(), strict=True):
            operator.setup(context, output)
            operator.initialize_state(files.restored(deploy.restore.get(operator.uid)))
            operator.open()
        self._connect_inputs()

    def _restore_channel_state(self, files: _StateFiles, where: tuple[str, int, int]) -> None:
        """Re-send recovered output and queue recovered input, before anything new."""
        recovered = read_channel_state(
            files.slice(*where),
            input_channels=self.gate.channel_count,
            output_channels=len(self.writer.channels),
        )
        self.writer.send_recovered(recovered.outputs)
        for channel, frames in sorted(recovered.inputs.items()):
            self.gate.prepend_recovered(channel, [(codec.decode(f), f) for f in frames])

    def _connect_outputs(self, deploy: DeployTask) -> RecordWriter:
        settings, vertex = self.settings, self.vertex
        edges = []
        self._output_targets.clear()
        for edge in vertex.outputs:
            channels = []
            for target in self.graph.output_channels(self.subtask, edge):
                hello = ChannelHello(
                    settings.job_id,
                    settings.attempt,
                    edge.edge_id,
                    (self.subtask.vertex_id, self.subtask.subtask_index),
                    (target.vertex_id, target.subtask_index),
                )
                index = len([c for e in edges for c in e.channels]) + len(channels)
                address = deploy.peers[settings.partitions.index(target)]
                conn = connect_output(address, settings.secret, hello, index, self.mailbox.put)
                channels.append(OutputChannel(conn))
                self._output_targets.append(target)
            source_operator = edge.source_operator
            if source_operator < 0:
                source_operator += len(self.chain)
            edges.append(
                EdgeWriter(
                    edge.partitioner,
                    channels,
                    settings.buffer_size,
                    source_operator=source_operator,
                    side_output=edge.side_output,
                )
            )
        return RecordWriter(edges)

    def _chain_outputs(self) -> list[Output]:
        """One output per operator: the next operator or the main edges, plus side edges."""
        writer, chain = self.writer, self.chain
        outputs: list[Output] = []
        for index in range(len(chain)):
            main: Output
            if index + 1 < len(chain):
                main = ChainingOutput(chain[index + 1])
            else:
                main = RecordWriterOutput(writer.edges_of(index, None))
            sides: dict[str, Output] = {
                tag: RecordWriterOutput(writer.edges_of(index, tag))
                for tag in sorted(writer.side_outputs_of(index))
            }
            outputs.append(OperatorOutput(main, sides))
        return outputs

    def _connect_inputs(self) -> None:
        """A valve per input of the first operator, over the channels that feed it."""
        if self._channel_inputs:
            self._inputs = ChainInputs(self.chain[0], self._channel_inputs)

    def _finish(self) -> None:
        # [mailbox-contract] close() only once every operator accepts input (nothing held back).
        self._wait_until(self._chain_accepts_input, "operators to finish their pending work")
        self.writer.broadcast_event(END_OF_PARTITION)
        for operator in self.chain:
            operator.close()
        self.uploader.close()
        self._send(TaskFinished(self.settings.attempt, self.partition))

    def _abort(self) -> None:
        for operator in self.chain:
            try:
                operator.abort()
            except Exception:
                log.warning("aborting %s failed", operator.name, exc_info=True)

    def _close_network(self) -> None:
        if self._server is not None:
            self._server.close()
        self.gate.close()
        self.writer.close()

    # ---- the mailbox loop ------------------------------------------------------------------

    def _loop(self) -> None:
        timeout_s = self.settings.buffer_timeout_ms / 1000
        while not self._finished:
            busy = self._can_work()
            try:
                if busy:
                    mail = self.mailbox.get_nowait()
                else:
                    wait = 0.002 if self._source_waiting else timeout_s
                    if self._next_wakeup_ms is not None:
                        until = (self._next_wakeup_ms - self._processing_time()) / 1000
                        wait = min(wait, max(until, 0.0))
                    mail = self.mailbox.get(timeout=wait)
                self._handle(mail)
                for _ in range(256):
                    self._handle(self.mailbox.get_nowait())
            except queue.Empty:
                pass
            self._source_waiting = False  # waited a moment: ask the source again
            if self._finished:
                break
            self._fire_processing_time()
            self._report_end_of_input()  # [mailbox-contract]
            if self._can_work():
                if self.source is not None:
                    self._step_source()
                else:
                    self._step_input()
            now = self._clock()
            if now - self._last_flush >= timeout_s:
                self.writer.flush()
                self._last_flush = now

    def _can_work(self) -> bool:
        if self.writer.is_backpressured():
            return False
        if not self._chain_accepts_input():  # [mailbox-contract]
            return False
        if self.source is not None:
            return not self._source_exhausted and not self._source_waiting
        assert self.barriers is not None
        return self.gate.has_available(self.barriers.is_blocked)

    # [mailbox-contract] begin: an operator that waits yields to the mailbox (accepts_input)
    def _chain_accepts_input(self) -> bool:
        """Whether every operator of the chain takes input (none holds work back)."""
        return all(operator.accepts_input() for operator in self.chain)

    _end_of_input_unsent = False

    def _report_end_of_input(self) -> None:
        """Tell the JobMaster the source ended once the chain holds nothing back, so the
        final checkpoint (its barrier) follows every record the chain will emit."""
        if self._end_of_input_unsent and self._chain_accepts_input():
            self._end_of_input_unsent = False
            self._send(EndOfInput(self.settings.attempt, self.partition))

    # [mailbox-contract] end

    def _fire_processing_time(self) -> None:
        """Call every operator whose wake-up is due; remember the next one for the wait."""
        now = self._processing_time()
        nearest = None
        if self._alignment_timers:
            assert self._unaligner is not None
            for checkpoint_id, due in sorted(self._alignment_timers.items()):
                if due <= now:
                    del self._alignment_timers[checkpoint_id]
                    self._act(self._unaligner.on_alignment_timeout(checkpoint_id))
            nearest = min(self._alignment_timers.values(), default=None)
        for operator in self.chain:
            due = operator.next_wakeup()
            if due is not None and due <= now:
                operator.on_processing_time(now)
                due = operator.next_wakeup()
            if due is not None and (nearest is None or due < nearest):
                nearest = due
        self._next_wakeup_ms = nearest

    def _step_source(self) -> None:
        assert self.source is not None
        status = self.source.emit_next(self.settings.buffer_size)
        if status == SourceOperator.END_OF_INPUT:
            self._source_exhausted = True
            self._end_of_input_unsent = True  # [mailbox-contract] sent by _report_end_of_input
        elif status == SourceOperator.NOTHING_AVAILABLE:
            self._source_waiting = True

    def _step_input(self) -> None:
        barriers = self.barriers
        assert barriers is not None
        polled = self.gate.poll(barriers.is_blocked)
        if polled is None:
            return
        channel, element = polled
        inputs = self._inputs
        assert inputs is not None
        kind = type(element)
        if kind is RecordBatch:
            inputs.records(channel, element)
        elif kind is Watermark:
            inputs.watermark(channel, element)
        elif kind is StreamStatus:
            inputs.stream_status(channel, element)
        elif kind is CheckpointBarrier:
            if self._unaligner is None:  # the unaligner noted it when it arrived
                self._note_first_barrier(element)
            self._act(barriers.on_barrier(channel, element))
        elif kind is CancelCheckpointMarker:
            self._act(barriers.on_cancel_marker(channel, element))
        elif kind is EndOfPartition:
            inputs.end_of_partition(channel)  # counts as MAX_WATERMARK from now on
            self._act(barriers.on_end_of_partition(channel))

    def _act(self, decisions: tuple[Any, ...]) -> None:
        """Carry out a barrier handler's decisions, in order (StopPersisting needs nothing:
        `is_persisting` already says what arriving data to keep)."""
        for decision in decisions:
            if isinstance(decision, TriggerCheckpoint):
                self._checkpoint(decision.barrier)
            elif isinstance(decision, TriggerUnaligned):
                self._checkpoint_unaligned(decision.barrier, sorted(decision.channels))
            elif isinstance(decision, ChannelStateComplete):
                self._complete_unaligned(decision.checkpoint_id)
            elif isinstance(decision, AbortCheckpoint):
                self.channel_state.abort(decision.checkpoint_id)
                self._held.pop(decision.checkpoint_id, None)
                self._decline(decision.checkpoint_id, decision.reason, "")
            elif isinstance(decision, ArmAlignmentTimer):
                due = self._processing_time() + decision.delay_ms
                self._alignment_timers[decision.checkpoint_id] = due
                if self._next_wakeup_ms is None or due < self._next_wakeup_ms:
                    self._next_wakeup_ms = due

    # ---- mails -------------------------------------------------------------------------------

    def _handle(self, mail: tuple[Any, ...]) -> None:
        kind = mail[0]
        if kind == "run":  # [mailbox-contract] an operator's action (MailboxExecutor.execute)
            mail[1]()
        elif kind == "input":
            channel, element = mail[1], mail[2]
            frame = mail[3] if len(mail) > 3 else None
            if isinstance(element, EndOfPartition):
                self._ended_channels.add(channel)
            self.gate.received(channel, element, frame)
            unaligner = self._unaligner
            if unaligner is not None:
                self._on_arrival(unaligner, channel, element, frame)
        elif kind == "credit":
            self.writer.channels[mail[1]].add_credit(mail[2])
        elif kind == "rpc":
            self._on_rpc(mail[1])
        elif kind == "channel_connected":
            self.gate.connected(mail[1], mail[2])
        elif kind == "input_lost":
            if mail[1] not in self._ended_channels and not self._finished:
                _, upstream = self._input_names[mail[1]]
                raise ChannelLostError(
                    f"lost the input channel from subtask {upstream} "
                    f"('{self.graph.vertex(upstream.vertex_id).name}'): it failed or was cancelled"
                )
        elif kind == "output_lost":
            if not self._finished:
                target = self._output_targets[mail[1]]
                raise ChannelLostError(
                    f"lost the output channel to subtask {target} "
                    f"('{self.graph.vertex(target.vertex_id).name}'): it failed or was cancelled"
                )
        elif kind == "input_error":
            raise mail[2]
        elif kind == "rpc_lost":
            raise TaskCancelled("lost the connection to the JobMaster")
        else:
            raise AssertionError(f"unknown mail {kind!r}")

    def _on_arrival(
        self,
        unaligner: CheckpointBarrierUnaligner,
        channel: int,
        element: Any,
        frame: bytes | None,
    ) -> None:
        """An element arrived (and is queued): announce barriers, persist in-flight data."""
        if type(element) is CheckpointBarrier:
            self._note_first_barrier(element)
            self._act(unaligner.on_barrier_announced(channel, element, self._processing_time()))
        elif unaligner.is_persisting(channel):
            checkpoint_id = unaligner.current_checkpoint_id
            assert checkpoint_id is not None
            if frame is None:
                frame = self.gate.queued_frames(channel)[-1]
            if is_channel_state_frame(frame):
                self.channel_state.add_input(checkpoint_id, channel, [frame])

    def _on_rpc(self, message: Any) -> None:
        if not isinstance(message, JOBMASTER_TO_TASK):
            raise StreamCorruptionError(f"unknown message from the JobMaster: {message!r}")
        if message.attempt != self.settings.attempt:
            log.warning("refused a message of attempt %d: %r", message.attempt, message)
            return
        if isinstance(message, DeployTask):
            self._deploy = message
        elif isinstance(message, TriggerMessage):
            self._source_waiting = False
            if self.source is None:
                raise StreamCorruptionError("a checkpoint trigger reached a task without a source")
            barrier = CheckpointBarrier(
                message.checkpoint_id, message.timestamp, message.is_savepoint, message.is_final
            )
            if self.settings.sources_unaligned and not barrier.must_align:
                self._checkpoint_unaligned(barrier, [])
                self._complete_unaligned(barrier.checkpoint_id)
            else:
                self._checkpoint(barrier)
        elif isinstance(message, NotifyCheckpointComplete):
            for operator in self.chain:
                operator.notify_checkpoint_complete(message.checkpoint_id)
            if message.is_final:
                self._finished = True
        elif isinstance(message, NotifyCheckpointAborted):
            for operator in self.chain:
                operator.notify_checkpoint_aborted(message.checkpoint_id)
        elif isinstance(message, CancelTask):
            raise TaskCancelled(message.reason)

    # ---- checkpoints -------------------------------------------------------------------------

    def _note_first_barrier(self, barrier: CheckpointBarrier) -> None:
        """Remember when checkpoint n's first barrier arrived (alignment time, start delay).

        Only the first barrier of a newer checkpoint counts; entries of checkpoints that
        never trigger here are dropped by `_decline` or by the next snapshot.
        """
        if barrier.checkpoint_id > self._newest_barrier_id:
            self._newest_barrier_id = barrier.checkpoint_id
            self._first_barrier[barrier.checkpoint_id] = (self._clock(), self._processing_time())

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Snapshot synchronously, forward the barrier, upload in the background."""
        held = self._snapshot(barrier)
        self.writer.broadcast_event(barrier)
        self._last_flush = self._clock()
        self._upload(held, None)

    def _checkpoint_unaligned(self, barrier: CheckpointBarrier, channels: list[int]) -> None:
        """Snapshot, send the barrier ahead of queued output, start the channel state.

        The overtaken output and, for each of `channels`, the input queued before its barrier
        go into the channel state; the snapshot is held until it completes.
        """
        checkpoint_id = barrier.checkpoint_id
        held = self._snapshot(barrier)
        state = self.channel_state
        state.start(checkpoint_id)
        overtaken = self.writer.broadcast_priority_event(barrier)
        self._last_flush = self._clock()
        for channel, frames in sorted(overtaken.items()):
            state.add_output(checkpoint_id, channel, frames)
        for channel in channels:
            queued = self.gate.queued_frames(channel)
            state.add_input(checkpoint_id, channel, in_flight_input(queued, checkpoint_id))
        self._held[checkpoint_id] = held

    def _complete_unaligned(self, checkpoint_id: int) -> None:
        """The channel state of `checkpoint_id` is complete: write it with the snapshot."""
        held = self._held.pop(checkpoint_id)
        self._upload(held, self.channel_state.finish(checkpoint_id))

    def _snapshot(self, barrier: CheckpointBarrier) -> _HeldSnapshot:
        """The synchronous part: every operator's snapshot, with timing statistics."""
        started = self._clock()
        first = self._first_barrier.pop(barrier.checkpoint_id, None)
        for older in [n for n in self._first_barrier if n < barrier.checkpoint_id]:
            del self._first_barrier[older]
        if first is None:  # a source: the trigger message is its first barrier
            alignment_ms, reached_ms = 0.0, self._processing_time()
        else:
            alignment_ms, reached_ms = (started - first[0]) * 1000, first[1]
        snapshots = {}
        for operator in self.chain:
            snapshot = operator.snapshot_state(barrier.checkpoint_id)
            if snapshot is not None:
                snapshots[operator.uid] = snapshot
        return _HeldSnapshot(
            barrier,
            snapshots,
            sync_ms=(self._clock() - started) * 1000,
            alignment_ms=alignment_ms,
            start_delay_ms=float(max(0, reached_ms - barrier.timestamp)),
        )

    def _upload(self, held: _HeldSnapshot, channel_state: ChannelStateSnapshot | None) -> None:
        """Encode the state file (operators, then channel state) and upload it, then ack."""
        started = self._clock()
        barrier = held.barrier
        body = bytearray()
        index: dict[str, dict[str, list[int] | None]] = {}
        for uid, snapshot in held.snapshots.items():
            entry: dict[str, list[int] | None] = {"keyed": None, "operator": None}
            if snapshot.keyed is not None:
                entry["keyed"] = [len(body), len(snapshot.keyed)]
                body += snapshot.keyed
            if snapshot.operator is not None:
                encoded = encode_operator_state(snapshot.operator)
                entry["operator"] = [len(body), len(encoded)]
                body += encoded
            if snapshot.timers is not None:
                entry["timers"] = [len(body), len(snapshot.timers)]
                body += snapshot.timers
            index[uid] = entry
        persisted = 0
        channel_section = None
        if channel_state is not None and channel_state.persisted_bytes > 0:
            channel_section = [len(body), len(channel_state.data)]
            body += channel_state.data
            persisted = channel_state.persisted_bytes
        settings, subtask = self.settings, self.subtask
        target = None
        handle = None
        data = b""
        if index or channel_section is not None:
            name = f"{subtask.vertex_id}-{subtask.subtask_index}-{settings.deployment_id}.state"
            target = _fs.Location(settings.checkpoint_dir).child(
                f"chk-{barrier.checkpoint_id}", name
            )
            key_range = self._context.key_group_range
            header: dict[str, Any] = {
                "vertex": subtask.vertex_id,
                "subtask": subtask.subtask_index,
                "operators": index,
            }
            handle = {
                "file": name,
                "subtask": subtask.subtask_index,
                "key_group_range": [key_range.start, key_range.end],
                "operators": index,
            }
            if channel_section is not None:
                header["channel_state"] = handle["channel_state"] = channel_section
            data = state_format.encode(SUBTASK_STATE, header, bytes(body))
        ack = AcknowledgeCheckpoint(
            settings.attempt,
            self.partition,
            barrier.checkpoint_id,
            handle,
            sync_ms=held.sync_ms + (self._clock() - started) * 1000,
            state_bytes=len(data),
            alignment_ms=held.alignment_ms,
            start_delay_ms=held.start_delay_ms,
            persisted_bytes=persisted,
            unaligned=channel_state is not None,
        )
        self.uploader.submit(Upload(barrier.checkpoint_id, target, data, ack))

    def _decline(self, checkpoint_id: int, reason: CheckpointFailureReason, message: str) -> None:
        self._first_barrier.pop(checkpoint_id, None)
        self.writer.broadcast_event(CancelCheckpointMarker(checkpoint_id))
        self._send(
            DeclineCheckpoint(
                self.settings.attempt, self.partition, checkpoint_id, reason.name, message
            )
        )

    def _report_failure(self, error: Exception) -> bool:
        """Tell the JobMaster why this task failed; True if it heard it.

        The JobMaster then fails the deployment over, so the Spark task ends quietly
        instead of adding a second copy of the traceback to the executor log.
        """
        log.warning("task %s (%s) failed: %s", self.vertex.name, self.subtask, error)
        try:
            self._send(
                TaskFailed(
                    self.settings.attempt, self.partition, TaskFailure.of(error, self.vertex.name)
                )
            )
        except TaskCancelled:
            return False
        return True

    def _send(self, message: Any) -> None:
        try:
            self._send_rpc(message)
        except OSError as error:
            raise TaskCancelled(f"lost the connection to the JobMaster: {error}") from error


class _TaskMailboxExecutor:  # [mailbox-contract]
    """The task's MailboxExecutor: `execute` (any thread) queues a "run" mail for the loop."""

    def __init__(self, put: Callable[[tuple[Any, ...]], None]) -> None:
        self._put = put

    def execute(self, action: Callable[[], None], description: str) -> None:
        self._put(("run", action, description))


@dataclass
class _HeldSnapshot:
    """The synchronous part of one checkpoint: operator snapshots and their statistics."""

    barrier: CheckpointBarrier
    snapshots: dict[str, Any]
    sync_ms: float
    alignment_ms: float
    start_delay_ms: float


class _StateFiles:
    """Reads a checkpoint's state files once each and slices out what an operator needs."""

    def __init__(self) -> None:
        self._bodies: dict[str, bytes] = {}

    def slice(self, uri: str, offset: int, length: int) -> bytes:
        """Bytes [offset, offset + length) of the body of the state file at `uri`."""
        return self._slice(uri, offset, length)

    def _slice(self, uri: str, offset: int, length: int) -> bytes:
        body = self._bodies.get(uri)
        if body is None:
            _, payload = state_format.decode(_fs.read_bytes(_fs.Location(uri)), SUBTASK_STATE)
            body = self._bodies[uri] = bytes(payload)
        return body[offset : offset + length]

    def restored(self, restore: Any) -> RestoredState | None:
        if restore is None:
            return None
        return RestoredState(
            keyed=[self._slice(uri, off, length) for uri, off, length in restore.keyed],
            operator=[
                (old, decode_operator_state(self._slice(uri, off, length)))
                for old, uri, off, length in restore.operator
            ],
            timers=[
                self._slice(uri, off, length) for uri, off, length in getattr(restore, "timers", ())
            ],
        )
