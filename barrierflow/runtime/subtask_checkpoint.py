"""SubtaskCheckpointCoordinator: a subtask's part of a checkpoint, from barrier to report.

Mailbox thread only. At a checkpoint's barrier it takes the synchronous snapshot of
the operator chain (with its statistics: alignment, start delay, sync duration; keyed
state as a `KeyedStateSnapshot`, O(key groups), not yet serialized), forwards the
barrier downstream (aligned: in order; unaligned: ahead of the queued output, which
becomes output channel state) and hands the sections to the `SnapshotUploader` as a
`PendingStateFile`: the uploader thread writes the keyed snapshots, encodes and writes
the subtask state file and acknowledges (`sync_ms` is the mailbox thread's part only,
`async_ms` the uploader's). It declines what the barrier handler aborts, passes the
JobMaster's complete/aborted notifications to the chain, keeps the channel state
(unaligned checkpoints) until each checkpoint's last barrier arrived, and releases the
keyed snapshots of a checkpoint it drops before the upload (an abort, `close`).

A savepoint's barrier names its folder (`CheckpointBarrier.target`): the state file goes
there instead of into `chk-<n>/`. Once the snapshot of a final checkpoint (the end of
bounded input, or a stop with savepoint) is taken, the task must process nothing more
until it finishes, as anything it emitted would be outside that snapshot:
`holds_final_snapshot` says so, until the final checkpoint is aborted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow._clock import Clock
from barrierflow._scheduler import Scheduler
from barrierflow.checkpoint import subtask_state_file
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.subtask_state_file import (
    HeldSections,
    PendingStateFile,
    SubtaskStateReader,
    release_keyed,
)
from barrierflow.runtime.barriers.decisions import (
    AbortCheckpoint,
    ArmAlignmentTimer,
    ChannelStateComplete,
    TriggerCheckpoint,
    TriggerUnaligned,
)
from barrierflow.runtime.channel_state import (
    ChannelStateSnapshot,
    ChannelStateWriter,
    in_flight_input,
    read_channel_state,
)
from barrierflow.runtime.deployment import SubtaskId, TaskSettings
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier
from barrierflow.runtime.network import codec
from barrierflow.runtime.network.checkpointed_input_gate import CheckpointedInputGate
from barrierflow.runtime.network.record_writer import RecordWriter
from barrierflow.runtime.operator_chain import OperatorChain
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.runtime.snapshot_uploader import SnapshotUploader, Upload
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeclineCheckpoint
from barrierflow.state.operator_state import encode_operator_state


@dataclass
class _HeldSnapshot:
    """The synchronous part of one checkpoint: operator snapshots and their statistics."""

    barrier: CheckpointBarrier
    snapshots: dict[str, OperatorSnapshot]
    sync_ms: float
    alignment_ms: float
    start_delay_ms: float

    def release(self) -> None:
        """Free the keyed snapshots of a checkpoint dropped before its upload."""
        release_keyed(snapshot.keyed for snapshot in self.snapshots.values())


class SubtaskCheckpointCoordinator:
    """The checkpoints of one attempt of one subtask (see the module docstring)."""

    def __init__(
        self,
        settings: TaskSettings,
        partition: int,
        subtask: SubtaskId,
        key_group_range: tuple[int, int],
        chain: OperatorChain,
        writer: RecordWriter,
        gate: CheckpointedInputGate | None,
        uploader: SnapshotUploader,
        send: Callable[[Any], None],
        clock: Clock,
        scheduler: Scheduler,
        fail_task: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._settings = settings
        self._partition = partition
        self._subtask = subtask
        self._key_group_range = key_group_range
        self._chain = chain
        self._writer = writer
        self._gate = gate
        self._uploader = uploader
        self._send = send
        self._clock = clock
        self._scheduler = scheduler
        self._fail_task = fail_task
        """Fails the task from the uploader thread (a value that cannot be serialized)."""
        self.channel_state = ChannelStateWriter(
            gate.channel_count if gate is not None else 0, len(writer.channels)
        )
        self._held: dict[int, _HeldSnapshot] = {}
        """Unaligned checkpoints whose snapshot waits for the channel state to complete."""
        self._first_barrier: dict[int, tuple[float, int]] = {}
        """Checkpoint id -> (monotonic s, epoch ms) when its first barrier arrived."""
        self._newest_barrier_id = -1
        self._final_snapshot: int | None = None
        """The final checkpoint whose snapshot this task took, until it completes or aborts."""

    @property
    def holds_final_snapshot(self) -> bool:
        """The final checkpoint's snapshot is taken and not aborted: process nothing more."""
        return self._final_snapshot is not None

    def restore_channel_state(self, reader: SubtaskStateReader, where: tuple[str, int, int]):
        """Re-send recovered output and queue recovered input, before anything new."""
        gate = self._gate
        recovered = read_channel_state(
            reader.slice(*where),
            input_channels=gate.channel_count if gate is not None else 0,
            output_channels=len(self._writer.channels),
        )
        self._writer.send_recovered(recovered.outputs)
        for channel, frames in sorted(recovered.inputs.items()):
            assert gate is not None
            gate.prepend_recovered(channel, [(codec.decode(f), f) for f in frames])

    # ---- from the JobMaster ------------------------------------------------------------------

    def trigger(self, barrier: CheckpointBarrier) -> None:
        """A source's checkpoint: the trigger message is its barrier."""
        if self._settings.sources_unaligned and not barrier.must_align:
            self._checkpoint_unaligned(barrier, [])
            self._complete_unaligned(barrier.checkpoint_id)
        else:
            self._checkpoint(barrier)

    def notify_complete(self, checkpoint_id: int) -> None:
        self._chain.notify_checkpoint_complete(checkpoint_id)

    def notify_aborted(self, checkpoint_id: int) -> None:
        if checkpoint_id == self._final_snapshot:  # retried later: the task may go on meanwhile
            self._final_snapshot = None
        # an unaligned snapshot still held goes on to the uploader, which drops it
        self._uploader.abort(self._settings.attempt, checkpoint_id)
        self._chain.notify_checkpoint_aborted(checkpoint_id)

    def close(self) -> None:
        """The attempt is torn down: release held snapshots, drop its queued uploads."""
        held, self._held = list(self._held.values()), {}
        for snapshot in held:
            snapshot.release()
        self._uploader.drop_attempt(self._settings.attempt)

    # ---- from the input gate -----------------------------------------------------------------

    def note_barrier(self, barrier: CheckpointBarrier) -> None:
        """Remember when checkpoint n's first barrier arrived (alignment time, start delay).

        Only the first barrier of a newer checkpoint counts; entries of checkpoints that
        never trigger here are dropped by a decline or by the next snapshot.
        """
        if barrier.checkpoint_id > self._newest_barrier_id:
            self._newest_barrier_id = barrier.checkpoint_id
            self._first_barrier[barrier.checkpoint_id] = (
                self._clock.monotonic(),
                self._clock.epoch_millis(),
            )

    def persist_input(self, checkpoint_id: int, channel: int, frame: bytes) -> None:
        """`frame` arrived on `channel` before its barrier: input channel state."""
        self.channel_state.add_input(checkpoint_id, channel, [frame])

    def act(self, decisions: tuple[Any, ...]) -> None:
        """Carry out a barrier handler's decisions, in order (StopPersisting needs nothing:
        the gate already says what arriving data to keep)."""
        for decision in decisions:
            if isinstance(decision, TriggerCheckpoint):
                self._checkpoint(decision.barrier)
            elif isinstance(decision, TriggerUnaligned):
                self._checkpoint_unaligned(decision.barrier, sorted(decision.channels))
            elif isinstance(decision, ChannelStateComplete):
                self._complete_unaligned(decision.checkpoint_id)
            elif isinstance(decision, AbortCheckpoint):
                self.channel_state.abort(decision.checkpoint_id)
                held = self._held.pop(decision.checkpoint_id, None)
                if held is not None:
                    held.release()
                self.decline(decision.checkpoint_id, decision.reason, "")
            elif isinstance(decision, ArmAlignmentTimer):
                self._arm_alignment_timer(decision.checkpoint_id, decision.delay_ms)

    def _arm_alignment_timer(self, checkpoint_id: int, delay_ms: int) -> None:
        gate = self._gate
        assert gate is not None
        self._scheduler.schedule(
            delay_ms,
            lambda: self.act(gate.alignment_timed_out(checkpoint_id)),
            f"aligned checkpoint timeout of checkpoint {checkpoint_id}",
        )

    def decline(self, checkpoint_id: int, reason: CheckpointFailureReason, message: str) -> None:
        self._first_barrier.pop(checkpoint_id, None)
        self._writer.broadcast_event(CancelCheckpointMarker(checkpoint_id))
        self._send(
            DeclineCheckpoint(
                self._settings.attempt, self._partition, checkpoint_id, reason.name, message
            )
        )

    # ---- taking a checkpoint -----------------------------------------------------------------

    def _checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Snapshot synchronously, forward the barrier, upload in the background."""
        held = self._snapshot(barrier)
        if barrier.is_final:
            self._final_snapshot = barrier.checkpoint_id
        self._writer.broadcast_event(barrier)
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
        overtaken = self._writer.broadcast_priority_event(barrier)
        for channel, frames in sorted(overtaken.items()):
            state.add_output(checkpoint_id, channel, frames)
        gate = self._gate
        for channel in channels:
            assert gate is not None
            queued = gate.queued_frames(channel)
            state.add_input(checkpoint_id, channel, in_flight_input(queued, checkpoint_id))
        self._held[checkpoint_id] = held

    def _complete_unaligned(self, checkpoint_id: int) -> None:
        """The channel state of `checkpoint_id` is complete: write it with the snapshot."""
        held = self._held.pop(checkpoint_id)
        self._upload(held, self.channel_state.finish(checkpoint_id))

    def _snapshot(self, barrier: CheckpointBarrier) -> _HeldSnapshot:
        """The synchronous part: every operator's snapshot, with timing statistics."""
        clock = self._clock
        started = clock.monotonic()
        first = self._first_barrier.pop(barrier.checkpoint_id, None)
        for older in [n for n in self._first_barrier if n < barrier.checkpoint_id]:
            del self._first_barrier[older]
        if first is None:  # a source: the trigger message is its first barrier
            alignment_ms, reached_ms = 0.0, clock.epoch_millis()
        else:
            alignment_ms, reached_ms = (started - first[0]) * 1000, first[1]
        snapshots = self._chain.snapshot_state(
            barrier.checkpoint_id, savepoint=barrier.target is not None
        )
        return _HeldSnapshot(
            barrier,
            snapshots,
            sync_ms=(clock.monotonic() - started) * 1000,
            alignment_ms=alignment_ms,
            start_delay_ms=float(max(0, reached_ms - barrier.timestamp)),
        )

    def _upload(self, held: _HeldSnapshot, channel_state: ChannelStateSnapshot | None) -> None:
        """Hand the sections (operators, then channel state) to the uploader, which writes
        the keyed snapshots and the state file and acknowledges."""
        started = self._clock.monotonic()
        settings, subtask, barrier = self._settings, self._subtask, held.barrier
        operators = {
            uid: HeldSections(
                keyed=snapshot.keyed,
                operator=None
                if snapshot.operator is None
                else encode_operator_state(snapshot.operator),
                timers=snapshot.timers,
            )
            for uid, snapshot in held.snapshots.items()
        }
        persisted = 0
        channel_bytes = None
        if channel_state is not None and channel_state.persisted_bytes > 0:
            channel_bytes = channel_state.data
            persisted = channel_state.persisted_bytes
        state_file = None
        if operators or channel_bytes is not None:
            name = subtask_state_file.state_file_name(
                subtask.vertex_id, subtask.subtask_index, settings.deployment_id
            )
            if barrier.target is not None:  # a savepoint: into its own folder
                location = _fs.Location(barrier.target).child(name)
            else:
                location = subtask_state_file.state_file_location(
                    settings.checkpoint_dir, barrier.checkpoint_id, name
                )
            state_file = PendingStateFile(
                location,
                subtask.vertex_id,
                subtask.subtask_index,
                self._key_group_range,
                operators,
                channel_bytes,
                savepoint=barrier.target is not None,
                final=barrier.is_final,
            )
        ack = AcknowledgeCheckpoint(
            settings.attempt,
            self._partition,
            barrier.checkpoint_id,
            None,  # the uploader fills in the handle and the size
            sync_ms=held.sync_ms + (self._clock.monotonic() - started) * 1000,
            alignment_ms=held.alignment_ms,
            start_delay_ms=held.start_delay_ms,
            persisted_bytes=persisted,
            unaligned=channel_state is not None,
        )
        self._uploader.submit(Upload(barrier.checkpoint_id, state_file, ack, self._fail_task))
