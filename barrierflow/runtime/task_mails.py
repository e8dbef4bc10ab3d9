"""TaskMailHandlers: what a `StreamTask` does with each kind of mail.

One method per mail type (`runtime.mails`), found through the task's `_handlers` table, and
`_on_rpc` for the JobMaster's messages (`task_messages.JOBMASTER_TO_TASK`). Part of
`StreamTask` (a base class of it), split out of `runtime/task.py` by role; it reads and
writes the task's per-attempt fields, declared below for the reader.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from barrierflow._clock import Clock
from barrierflow.errors import ChannelLostError, ChaosFailure, StreamCorruptionError
from barrierflow.runtime import mails
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.attempt_outcome import AttemptEnded, TaskCancelled
from barrierflow.runtime.deployment import SubtaskId, TaskDescriptor
from barrierflow.runtime.elements import CheckpointBarrier
from barrierflow.runtime.metrics.task_metrics import TaskMetrics
from barrierflow.runtime.network.checkpointed_input_gate import CheckpointedInputGate
from barrierflow.runtime.network.record_writer import RecordWriter
from barrierflow.runtime.operator_chain import OperatorChain
from barrierflow.runtime.subtask_checkpoint import SubtaskCheckpointCoordinator
from barrierflow.runtime.task_phase import TaskPhase

__all__ = ["TaskMailHandlers"]

log = logging.getLogger("barrierflow.runtime.task")


class TaskMailHandlers:
    """The mail handlers of a `StreamTask`; mailbox thread only."""

    descriptor: TaskDescriptor
    attempt: int
    chain: OperatorChain
    gate: CheckpointedInputGate | None
    writer: RecordWriter
    metrics: TaskMetrics
    checkpoints: SubtaskCheckpointCoordinator
    _clock: Clock
    _phase: TaskPhase
    _handlers: dict[type, Callable[[Any], None]]
    _deploy: msg.DeployTask | None
    _output_targets: list[SubtaskId]
    _gone_inputs: set[int]
    _held_actions: list[mails.RunAction]
    _finished_at: float
    _source_waiting: bool
    _stop_source: Callable[[bool], None]

    def handle(self, mail: Any) -> None:
        """Handle one mail; refuse one of another attempt, fail on an unknown type."""
        handler = self._handlers.get(type(mail))
        if handler is None:
            raise StreamCorruptionError(f"unknown mail {mail!r}")
        if mail.attempt is not None and mail.attempt != self.attempt:
            log.info("refused a mail of attempt %s: %r", mail.attempt, mail)
            return
        handler(mail)

    def _on_input(self, mail: mails.InputReceived) -> None:
        gate = self.gate
        if gate is None:
            raise StreamCorruptionError(f"input on channel {mail.channel} of a source task")
        if mail.frame is not None:
            self.metrics.bytes_in += len(mail.frame)
        arrival = gate.received(mail.channel, mail.element, mail.frame, self._clock.epoch_millis())
        if type(mail.element) is CheckpointBarrier and gate.announces_barriers:
            self.checkpoints.note_barrier(mail.element)
        if arrival.persist_for is not None and arrival.frame is not None:
            self.checkpoints.persist_input(arrival.persist_for, mail.channel, arrival.frame)
        self.checkpoints.act(arrival.decisions)

    def _on_credit(self, mail: mails.CreditReceived) -> None:
        self.writer.channels[mail.channel].add_credit(mail.credit)

    def _on_channel_connected(self, mail: mails.ChannelConnected) -> None:
        assert self.gate is not None
        self.gate.connected(mail.channel, mail.connection)

    def _on_input_lost(self, mail: mails.InputChannelLost) -> None:
        gate = self.gate
        if self._phase.final_checkpoint_done:
            self._gone_inputs.add(mail.channel)
            return
        if gate is not None and gate.has_ended(mail.channel):
            return
        upstream = self.descriptor.inputs[mail.channel].upstream
        raise ChannelLostError(
            f"lost the input channel from subtask {upstream} "
            f"('{self.descriptor.vertex_name_of(upstream)}'): it failed or was cancelled"
        )

    def _on_output_lost(self, mail: mails.OutputChannelLost) -> None:
        if self._phase.final_checkpoint_done:
            return
        target = self._output_targets[mail.channel]
        raise ChannelLostError(
            f"lost the output channel to subtask {target} "
            f"('{self.descriptor.vertex_name_of(target)}'): it failed or was cancelled"
        )

    def _on_action(self, mail: mails.RunAction) -> None:
        """Run an operator's action (an async I/O outcome), unless the final checkpoint's
        snapshot is taken: what it emits would follow the final barrier, though the snapshot
        holds its input (a stop with savepoint without drain). It waits: it runs if that
        checkpoint aborts, and is dropped when the task finishes."""
        if self.checkpoints.holds_final_snapshot:
            self._held_actions.append(mail)
        else:
            mail.action()

    def _on_input_failed(self, mail: mails.InputFailed) -> None:
        raise mail.error

    def _on_output_failed(self, mail: mails.OutputFailed) -> None:
        raise mail.error

    def _on_snapshot_failed(self, mail: mails.SnapshotFailed) -> None:
        raise mail.error

    def _on_rpc_lost(self, mail: mails.RpcLost) -> None:
        raise TaskCancelled("lost the connection to the JobMaster")

    def _on_rpc(self, mail: mails.RpcReceived) -> None:
        message = mail.message
        if not isinstance(message, msg.JOBMASTER_TO_TASK):
            raise StreamCorruptionError(f"unknown message from the JobMaster: {message!r}")
        if isinstance(message, msg.DeployTask):
            self._deploy = message
        elif isinstance(message, msg.TriggerCheckpoint):
            self._source_waiting = False
            if self.chain.source is None:
                raise StreamCorruptionError("a checkpoint trigger reached a task without a source")
            self.checkpoints.trigger(
                CheckpointBarrier(
                    message.checkpoint_id,
                    message.timestamp,
                    message.is_savepoint,
                    message.is_final,
                    message.target,
                )
            )
        elif isinstance(message, msg.NotifyCheckpointComplete):
            self.checkpoints.notify_complete(message.checkpoint_id)
            if message.is_final:
                self._phase = self._phase.to(TaskPhase.FINISHING)
                self._finished_at = self._clock.monotonic()
        elif isinstance(message, msg.NotifyCheckpointAborted):
            self.checkpoints.notify_aborted(message.checkpoint_id)
            if not self.checkpoints.holds_final_snapshot:  # the task goes on
                held, self._held_actions = self._held_actions, []
                for action in held:
                    action.action()
        elif isinstance(message, msg.CancelTask):
            raise TaskCancelled(message.reason)
        elif isinstance(message, msg.EndAttempt):
            raise AttemptEnded(message.reason)
        elif isinstance(message, msg.InjectFailure):
            raise ChaosFailure(message.reason)
        elif isinstance(message, msg.StopSources):
            self._stop_source(message.drain)
        elif isinstance(message, msg.RestartTask):  # the next attempt follows this one's end
            raise StreamCorruptionError(f"attempt {message.attempt} reached a running attempt")
