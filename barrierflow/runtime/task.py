"""StreamTask: one subtask's lifecycle and its single-threaded mailbox loop.

Everything that happens to a task arrives as a typed mail (`runtime.mails`) in one
queue: records and events from input channels, credit from output channels,
messages from the JobMaster, and actions handed over by operators' helpers. The
loop takes mails, runs what is due (scheduled timers, processing-time wake-ups),
then does one unit of work (a source batch, or an element from the input gate)
unless an operator does not accept input, and flushes output buffers when the
buffer timeout has passed.

The task delegates: the `OperatorChain` runs the operators, the
`CheckpointedInputGate` queues input and consults the barrier handler, and the
`SubtaskCheckpointCoordinator` snapshots, reports and keeps channel state. An attempt
can be torn down and the next one deployed in the same process (`restart`).

Where an attempt stands is one `TaskPhase` (`runtime.task_phase`, with its allowed moves).
The mail handlers live in `runtime.task_mails` (`TaskMailHandlers`) and the reports to the
JobMaster in `runtime.task_reports` (`TaskReports`), base classes of `StreamTask`; this
module keeps the lifecycle, the mailbox loop and the end of input.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
from collections.abc import Callable
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow._scheduler import Scheduler
from barrierflow.checkpoint.chaos_faults import TransientFaults
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.errors import BarrierflowError, ChaosFailure, StreamCorruptionError
from barrierflow.runtime import mails
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.attempt_outcome import AttemptEnd, AttemptEnded, TaskCancelled
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.deployment import SubtaskId, TaskDescriptor, TaskSettings
from barrierflow.runtime.elements import (
    END_OF_PARTITION,
    CheckpointBarrier,
    EndOfPartition,
    LatencyMarker,
    StreamStatus,
    Watermark,
)
from barrierflow.runtime.metrics.task_metrics import TaskMetrics
from barrierflow.runtime.network import task_channels
from barrierflow.runtime.network.channels import DataServer
from barrierflow.runtime.network.checkpointed_input_gate import CheckpointedInputGate
from barrierflow.runtime.network.input_gate import InputGate
from barrierflow.runtime.network.record_writer import RecordWriter
from barrierflow.runtime.operator_chain import OperatorChain, operator_context
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.runtime.snapshot_uploader import SnapshotUploader
from barrierflow.runtime.subtask_checkpoint import SubtaskCheckpointCoordinator
from barrierflow.runtime.task_mails import TaskMailHandlers
from barrierflow.runtime.task_phase import TaskPhase
from barrierflow.runtime.task_reports import TaskReports

log = logging.getLogger(__name__)


class StreamTask(TaskMailHandlers, TaskReports):
    """Runs one subtask, one attempt at a time, until it finishes, is cancelled, or fails."""

    def __init__(
        self,
        descriptor: TaskDescriptor,
        settings: TaskSettings,
        partition: int,
        send_rpc: Callable[[Any], None],
        mailbox: queue.SimpleQueue,
        clock: Clock = SYSTEM_CLOCK,
        *,
        executor_host: str | None = None,
    ) -> None:
        """`executor_host`: the host of the executor this task runs on, as the other
        executors reach it (None: this machine's name)."""
        self.descriptor = descriptor
        self.executor_host = executor_host or socket.gethostname()
        self.partition = partition
        self.subtask: SubtaskId = settings.partitions[partition]
        if self.subtask != descriptor.subtask:
            raise ValueError(f"partition {partition} runs {self.subtask}, not {descriptor.subtask}")
        self._send_rpc = send_rpc
        self.mailbox = mailbox
        self._clock = clock
        self.uploader = SnapshotUploader(send_rpc, clock)
        self._phase = TaskPhase.RUNNING
        """Where the current attempt stands; `restart` moves it from TORN_DOWN to RUNNING."""
        self._handlers: dict[type, Callable[[Any], None]] = {
            mails.InputReceived: self._on_input,
            mails.CreditReceived: self._on_credit,
            mails.ChannelConnected: self._on_channel_connected,
            mails.InputChannelLost: self._on_input_lost,
            mails.OutputChannelLost: self._on_output_lost,
            mails.InputFailed: self._on_input_failed,
            mails.OutputFailed: self._on_output_failed,
            mails.RpcReceived: self._on_rpc,
            mails.RpcLost: self._on_rpc_lost,
            mails.RunAction: self._on_action,
            mails.SnapshotFailed: self._on_snapshot_failed,
        }
        self._prepare(settings)

    def _prepare(self, settings: TaskSettings) -> None:
        """Fresh per-attempt state: a new chain, gate, writer, timers and checkpoints."""
        descriptor = self.descriptor
        self.settings = settings
        self.attempt = settings.attempt
        self.scheduler = Scheduler(self._clock)
        self.chain = OperatorChain(descriptor)
        channels = len(descriptor.inputs)
        self.gate: CheckpointedInputGate | None = (
            CheckpointedInputGate(InputGate(channels), settings.barrier_handler(channels))
            if channels
            else None
        )
        self.writer = RecordWriter([])
        self.metrics = TaskMetrics(self._clock)
        self.checkpoints = self._checkpoint_coordinator()
        self._server: DataServer | None = None
        self._deploy: msg.DeployTask | None = None
        self._output_targets: list[SubtaskId] = []
        self._finished_at = 0.0
        self._gone_inputs: set[int] = set()
        """Input channels lost after the final checkpoint: their upstream will send nothing."""
        self._held_actions: list[mails.RunAction] = []
        """Operator actions that came after the final checkpoint's snapshot: they run only if
        that checkpoint aborts."""
        self._source_waiting = False
        self._next_wakeup_ms: int | None = None
        self._last_flush = self._clock.monotonic()

    def _checkpoint_coordinator(self) -> SubtaskCheckpointCoordinator:
        key_range = self.descriptor.key_group_range
        return SubtaskCheckpointCoordinator(
            self.settings,
            self.partition,
            self.subtask,
            (key_range.start, key_range.end),
            self.chain,
            self.writer,
            self.gate,
            self.uploader,
            self._send,
            self._clock,
            self.scheduler,
            self._snapshot_failure_poster(self.settings.attempt),
        )

    def _snapshot_failure_poster(self, attempt: int) -> Callable[[BaseException], None]:
        """For the uploader thread: fail `attempt` with an error, on the mailbox thread."""
        post = self.mailbox.put
        return lambda error: post(mails.SnapshotFailed(attempt, error))

    # ---- lifecycle -------------------------------------------------------------------------

    def run(self) -> AttemptEnd:
        """Run the current attempt: register, deploy and restore, process, finish or fail."""
        settings = self.settings
        try:
            bind, advertised = task_channels.data_addresses(
                settings.task_bind_address, self.executor_host
            )
            post = self.mailbox.put
            self._server = task_channels.data_server(self.descriptor, settings, bind, post)
            self._server.start()
            self._send(
                msg.RegisterTask(
                    settings.attempt,
                    self.partition,
                    (advertised, self._server.address[1]),
                    socket.gethostname(),
                    os.getpid(),
                )
            )
            self._wait_until(lambda: self._deploy is not None, "deployment")
            assert self._deploy is not None
            self.deploy_and_restore(self._deploy)
            self._wait_until(lambda: self.gate is None or self.gate.all_connected, "inputs")
            self._send(msg.TaskRunning(settings.attempt, self.partition))
            self._report_metrics(first=True)
            self._schedule_latency_marker()
            self._loop()
            self._finish()
            return AttemptEnd.FINISHED
        except AttemptEnded:
            return AttemptEnd.ENDED
        except TaskCancelled:
            return AttemptEnd.CANCELLED
        except Exception as error:
            self.chain.abort()
            if not self._report_failure(error):
                raise  # the JobMaster is unreachable: let Spark carry the cause
            return AttemptEnd.FAILED
        finally:
            self.tear_down()

    def restart(self, settings: TaskSettings) -> None:
        """Tear the current attempt down (if still up) and prepare attempt `settings.attempt`
        in this process; `run()` then registers, deploys and restores it.

        The uploader stays: an upload of the old attempt being written finishes, and the
        JobMaster refuses its acknowledgement by attempt number, as every mail of the old
        attempt still queued here is refused by this task; its queued uploads are dropped
        (`SubtaskCheckpointCoordinator.close` at the tear-down).
        """
        if settings.attempt <= self.attempt:
            raise ValueError(f"attempt {settings.attempt} does not follow {self.attempt}")
        self.tear_down()
        if not self.uploader.is_alive:
            self.uploader = SnapshotUploader(self._send_rpc, self._clock)
        self._phase = self._phase.to(TaskPhase.RUNNING)
        self._prepare(settings)

    def tear_down(self) -> None:
        """Abort the chain unless it closed, and close the channels and the data server."""
        if self._phase is TaskPhase.TORN_DOWN:
            return
        self._phase = self._phase.to(TaskPhase.TORN_DOWN)
        self.checkpoints.close()
        self.chain.abort()
        if self._server is not None:
            self._server.close()
        if self.gate is not None:
            self.gate.close()
        self.writer.close()

    def _wait_until(self, condition: Callable[[], bool], what: str) -> None:
        deadline = self._clock.monotonic() + self.settings.connect_timeout_s
        while not condition():
            if self._clock.monotonic() > deadline:
                raise BarrierflowError(
                    f"task {self.descriptor.vertex_name} ({self.subtask}) waited "
                    f"{self.settings.connect_timeout_s:.0f} s for its {what}"
                )
            with contextlib.suppress(queue.Empty):
                self.handle(self.mailbox.get(timeout=0.1))

    def deploy_and_restore(self, deploy: msg.DeployTask) -> None:
        """Connect the outputs, restore channel state and operators, open the chain."""
        descriptor, settings = self.descriptor, self.settings
        context = operator_context(
            descriptor,
            settings,
            self._clock,
            mails.TaskMailboxExecutor(self.mailbox.put, settings.attempt),
            deploy.restore_checkpoint_id,
            deploy.abandoned_above,
        )
        if self.chain.source is not None:
            self.chain.source.assign_splits(deploy.splits)
        self.writer, self._output_targets = task_channels.connect_outputs(
            descriptor, settings, deploy.peers, self.mailbox.put
        )
        self.checkpoints = self._checkpoint_coordinator()
        reader = SubtaskStateReader()
        faults = TransientFaults(lambda kind, loc: loc.name.endswith(".state"))
        faults.arm("read", deploy.read_faults)
        if deploy.read_faults:
            faults.install()
        try:
            if deploy.channel_state is not None:
                self.checkpoints.restore_channel_state(reader, deploy.channel_state)
            if deploy.fail_restore is not None:
                raise ChaosFailure(deploy.fail_restore)
            self.chain.open(context, self.writer, deploy.restore, reader)
        finally:
            faults.uninstall()

    def _finish(self) -> None:
        """End normally: close the chain first, so what it emits while closing goes out,
        then end every output partition, wait for the uploads, and say so."""
        self.chain.close()
        self.writer.flush()
        self.writer.broadcast_event(END_OF_PARTITION)
        self.uploader.close()
        self._send(self.metrics_report())
        self._send(msg.TaskFinished(self.settings.attempt, self.partition))
        self._phase = self._phase.to(TaskPhase.FINISHED)

    # ---- the mailbox loop ------------------------------------------------------------------

    def _loop(self) -> None:
        timeout_s = self.settings.buffer_timeout_ms / 1000
        self.metrics.time.start()
        while not (
            self._phase.final_checkpoint_done
            and self.chain.accepts_input()
            and self._inputs_released()
        ):
            try:
                if self._can_work():
                    mail = self.mailbox.get_nowait()
                else:
                    mail = self._wait_for_mail(timeout_s)
                self.handle(mail)
                for _ in range(256):
                    self.handle(self.mailbox.get_nowait())
            except queue.Empty:
                pass
            self._source_waiting = False  # waited a moment: ask the source again
            if self._phase.final_checkpoint_done:
                continue
            self.scheduler.run_due()
            if self.checkpoints.holds_final_snapshot:  # nothing may follow the final barrier
                self._next_wakeup_ms = None
            else:
                self._next_wakeup_ms = self.chain.fire_processing_time(self._clock.epoch_millis())
            self._report_end_of_input()
            if self._can_work():
                if self.chain.source is not None:
                    self._step_source()
                else:
                    self._step_input()
            now = self._clock.monotonic()
            if now - self._last_flush >= timeout_s:
                self.writer.flush()
                self._last_flush = now

    def _wait_for_mail(self, longest_s: float) -> Any:
        """Block on the mailbox (queue.Empty when nothing came), counted as backpressured
        time while an output waits for credit, else as idle time."""
        time = self.metrics.time
        time.wait(backpressured=self.writer.is_backpressured())
        try:
            return self.mailbox.get(timeout=self._wait_s(longest_s))
        finally:
            time.resume()

    def _inputs_released(self) -> bool:
        """Every upstream ended its partitions (or is gone), so closing the input channels
        cannot fail an upstream that has not yet heard the final checkpoint completed (as
        Flink, a task ends after the end of partition of all its inputs). Bounded by the
        connect timeout."""
        gate = self.gate
        if gate is None:
            return True
        if self._clock.monotonic() - self._finished_at > self.settings.connect_timeout_s:
            log.warning("task %s ends without every input's end", self.descriptor.vertex_name)
            return True
        return all(gate.has_ended(c) or c in self._gone_inputs for c in range(gate.channel_count))

    def _wait_s(self, longest: float) -> float:
        """How long the loop may block on its mailbox."""
        wait = 0.002 if self._source_waiting else longest
        if self._next_wakeup_ms is not None:
            until = (self._next_wakeup_ms - self._clock.epoch_millis()) / 1000
            wait = min(wait, max(until, 0.0))
        return self.scheduler.wait_s(wait)

    def _can_work(self) -> bool:
        """Whether the loop may do a unit of work: never after the final checkpoint's barrier
        (an upstream's end of partition, which counts as MAX_WATERMARK, would fire windows
        whose output no savepoint holds), nor while backpressured or held up."""
        if self._phase.final_checkpoint_done or self.checkpoints.holds_final_snapshot:
            return False
        if self.writer.is_backpressured() or not self.chain.accepts_input():
            return False
        if self.chain.source is not None:
            return not self._phase.source_ended and not self._source_waiting
        return self.gate is not None and self.gate.has_available()

    def _step_source(self) -> None:
        source = self.chain.source
        assert source is not None
        status = source.emit_next(self.settings.buffer_size)
        if status == SourceOperator.END_OF_INPUT:
            self._source_ended()
        elif status == SourceOperator.NOTHING_AVAILABLE:
            self._source_waiting = True

    def _stop_source(self, drain: bool) -> None:
        """Stop with savepoint: end the source's input now (see `SourceOperator.stop`); the
        final checkpoint, a savepoint, follows once the JobMaster heard every source ended."""
        source = self.chain.source
        if source is None:
            raise StreamCorruptionError("StopSources reached a task without a source")
        if self._phase.source_ended:
            return  # it ended on its own: EndOfInput is sent or on its way
        source.stop(drain)
        self._source_ended()
        self._source_waiting = False

    def _source_ended(self) -> None:
        """The source reads nothing more; EndOfInput goes once the chain holds nothing back."""
        self._phase = self._phase.to(TaskPhase.INPUT_ENDED)

    def _report_end_of_input(self) -> None:
        """Tell the JobMaster the source ended once the chain holds nothing back (async calls
        in flight), so the final checkpoint's barrier follows every result."""
        if self._phase is TaskPhase.INPUT_ENDED and self.chain.accepts_input():
            self._phase = self._phase.to(TaskPhase.INPUT_REPORTED)
            self._send(msg.EndOfInput(self.settings.attempt, self.partition))

    def _step_input(self) -> None:
        gate, inputs = self.gate, self.chain.inputs
        assert gate is not None and inputs is not None
        polled = gate.poll()
        if polled is None:
            return
        channel, element = polled.channel, polled.element
        kind = type(element)
        if kind is RecordBatch or kind is ColumnarBatch:
            self.chain.metrics[0].records_in += len(element)
            inputs.records(channel, element)
        elif kind is Watermark:
            inputs.watermark(channel, element)
        elif kind is StreamStatus:
            inputs.stream_status(channel, element)
        elif kind is EndOfPartition:
            inputs.end_of_partition(channel)  # counts as MAX_WATERMARK from now on
        elif kind is LatencyMarker:
            self.chain.process_latency_marker(element)  # never reaches an operator's code
        elif kind is CheckpointBarrier:
            self.checkpoints.note_barrier(element)  # no-op if noted on arrival
        self.checkpoints.act(polled.decisions)
