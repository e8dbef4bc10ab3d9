"""Carrying out the checkpoint coordinator's actions for one attempt.

The coordinator (checkpoint/coordinator.py) decides; this executes: it sends
triggers and notifications to the tasks, writes `_metadata`, discards folders,
feeds the statistics tracker, and fails the attempt when the coordinator says so.
JobMaster thread only.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from barrierflow.checkpoint import coordinator as cc
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.checkpoint.stats import SubtaskCheckpointStats, SubtaskDecline
from barrierflow.cluster.attempt_failure import AttemptFailed, AttemptFailure
from barrierflow.errors import CheckpointStorageError
from barrierflow.runtime import task_messages as msg

if TYPE_CHECKING:
    from barrierflow.cluster.attempt import Attempt
    from barrierflow.cluster.job_master import JobMaster

log = logging.getLogger(__name__)


class CheckpointActions:
    """Executes `CoordinatorAction`s of one attempt's coordinator, in the order given."""

    def __init__(self, master: JobMaster, attempt: Attempt, coordinator: cc.CheckpointCoordinator):
        self._master = master
        self._attempt = attempt
        self.coordinator = coordinator
        self._stats = master.stats_tracker

    def _now(self) -> int:
        return self._master.clock.epoch_millis()

    # ---- task reports ----------------------------------------------------------------------

    def acknowledged(self, ack: msg.AcknowledgeCheckpoint) -> None:
        now = self._now()
        result, actions = self.coordinator.receive_acknowledge(
            ack.checkpoint_id, ack.partition, ack.state_handle, now
        )
        if result is cc.AcknowledgeResult.SUCCESS:
            subtask = self._master.partitions[ack.partition]
            self._stats.report_acknowledged(
                ack.checkpoint_id,
                SubtaskCheckpointStats(
                    subtask.vertex_id,
                    subtask.subtask_index,
                    now,
                    sync_ms=ack.sync_ms,
                    async_ms=ack.async_ms,
                    alignment_ms=ack.alignment_ms,
                    start_delay_ms=ack.start_delay_ms,
                    state_bytes=ack.state_bytes,
                    persisted_bytes=ack.persisted_bytes,
                    unaligned=ack.unaligned,
                ),
            )
            self._master.publisher.mark_dirty()
        self.carry_out(actions)

    def declined(self, decline: msg.DeclineCheckpoint) -> None:
        now = self._now()
        reason = CheckpointFailureReason[decline.reason]
        subtask = self._master.partitions[decline.partition]
        self._stats.report_declined(
            decline.checkpoint_id,
            SubtaskDecline(subtask.vertex_id, subtask.subtask_index, now, reason, decline.message),
        )
        self.carry_out(
            self.coordinator.receive_decline(decline.checkpoint_id, decline.partition, reason, now)
        )

    # ---- actions ---------------------------------------------------------------------------

    def carry_out(self, actions: list[cc.CoordinatorAction]) -> None:
        for action in actions:
            if isinstance(action, cc.TriggerCheckpoint):
                self._trigger(action)
            elif isinstance(action, cc.FinalizeCheckpoint):
                self._finalize(action)
            elif isinstance(action, cc.NotifyCheckpointComplete):
                self._completed(action)
            elif isinstance(action, cc.NotifyCheckpointAborted):
                self._report_failed(action)
                self._attempt.send_to_all(
                    msg.NotifyCheckpointAborted(self._attempt.number, action.checkpoint_id)
                )
            elif isinstance(action, cc.DiscardState):
                self._master.storage.discard(action.checkpoint_id)
            elif isinstance(action, cc.FailJob):
                raise AttemptFailed(AttemptFailure(action.reason))
            else:
                raise TypeError(f"unknown coordinator action {action!r}")

    def _trigger(self, action: cc.TriggerCheckpoint) -> None:
        self._stats.report_triggered(
            action.checkpoint_id,
            action.timestamp_ms,
            is_savepoint=action.is_savepoint,
            is_final=action.is_final,
        )
        self._master.publisher.mark_dirty()
        trigger = msg.TriggerCheckpoint(
            self._attempt.number,
            action.checkpoint_id,
            action.timestamp_ms,
            action.is_final,
            is_savepoint=action.is_savepoint,
        )
        for partition in sorted(self._attempt.source_partitions):
            self._attempt.send(partition, trigger)

    def _finalize(self, action: cc.FinalizeCheckpoint) -> None:
        master = self._master
        handles = {master.partitions[p]: h for p, h in action.task_states.items()}
        metadata = build_metadata(
            master.graph,
            action.checkpoint_id,
            action.timestamp_ms,
            action.is_final,
            handles,
            is_savepoint=action.is_savepoint,
        )
        try:
            master.storage.write_metadata(action.checkpoint_id, metadata)
        except CheckpointStorageError:
            log.warning("finalizing checkpoint %d failed", action.checkpoint_id, exc_info=True)
            self.carry_out(self.coordinator.on_finalize_failed(action.checkpoint_id, self._now()))
            return
        self.carry_out(self.coordinator.on_checkpoint_finalized(action.checkpoint_id, self._now()))

    def _report_failed(self, action: cc.NotifyCheckpointAborted) -> None:
        stats = self._stats.report_failed(action.checkpoint_id, self._now(), action.reason)
        self._master.checkpoint_ended(stats)

    def _completed(self, action: cc.NotifyCheckpointComplete) -> None:
        master = self._master
        stats = self._stats.report_completed(
            action.checkpoint_id,
            self._now(),
            external_path=master.storage.checkpoint_dir(action.checkpoint_id).uri,
        )
        master.checkpoint_stats.append(stats)
        self._attempt.send_to_all(
            msg.NotifyCheckpointComplete(
                self._attempt.number, action.checkpoint_id, action.is_final
            )
        )
        master.checkpoint_ended(stats)
        master.storage.retain(master.settings.retained_checkpoints)
        publisher = master.publisher
        publisher.publish(
            completed_checkpoints=(*publisher.status.completed_checkpoints, action.checkpoint_id)
        )
        if action.is_final:
            publisher.publish(state="FINISHING")

    def abort_on_failover(self) -> None:
        """Abort every pending checkpoint; only its files go, as the tasks are being cancelled."""
        for action in self.coordinator.abort_pending_on_failover(self._now()):
            if isinstance(action, cc.NotifyCheckpointAborted):
                # A checkpoint whose trigger action was never carried out (the failure
                # came first, in the same batch of actions) never reached the tracker.
                if action.checkpoint_id in self._stats.in_progress_ids:
                    self._report_failed(action)
            elif isinstance(action, cc.DiscardState):
                with contextlib.suppress(OSError):
                    self._master.storage.discard(action.checkpoint_id)
