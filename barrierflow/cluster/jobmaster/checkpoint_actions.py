"""Carrying out the checkpoint coordinator's actions for one attempt.

The coordinator (checkpoint/coordinator.py) decides; this executes: it sends
triggers and notifications to the tasks, writes `_metadata`, discards folders,
feeds the statistics tracker, and fails the attempt when the coordinator says so.
JobMaster thread only. A storage error after a checkpoint completed (retention, deleting an
aborted checkpoint's folder) is logged and tried again later, never fatal; one writing
`_metadata` aborts that checkpoint (the tolerable-failure count decides).

Incremental checkpoints: the shared files each acknowledgement references are collected
per checkpoint; `_metadata` lists them, the storage's shared-state registry counts them once
the checkpoint completed (before retention runs, which releases what it deletes), and the
files an aborted checkpoint uploaded (or a late acknowledgement of one) are deleted unless a
retained checkpoint references them.

A savepoint the JobMaster was asked for (`SavepointRequest`) has its own folder: its
trigger names it (the barrier carries it to every task), `_metadata` is written there,
a failed or aborted savepoint deletes it, and retention never looks at it. The JobMaster
hears how each requested savepoint ended (`SavepointRequests.savepoint_ended`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from barrierflow import _envelope, _fs
from barrierflow.checkpoint import coordinator as cc
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.metadata import build_metadata
from barrierflow.checkpoint.stats import SubtaskCheckpointStats, SubtaskDecline
from barrierflow.checkpoint.storage import METADATA, METADATA_KIND
from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailed, AttemptFailure
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.errors import CheckpointStorageError
from barrierflow.runtime import task_messages as msg

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.attempt import Attempt
    from barrierflow.cluster.jobmaster.hosts import CheckpointHost

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavepointRequest:
    """A savepoint asked for through the job's actions: its trigger id and its folder."""

    trigger_id: str
    folder: _fs.Location
    """`<target>/savepoint-<job id[:6]>-<12 hex>/`, proven writable before it triggers."""
    stop: bool = False
    """A stop with savepoint: its savepoint is the final checkpoint."""
    drain: bool = False


def write_savepoint_metadata(folder: _fs.Location, metadata: dict[str, Any]) -> None:
    """Write a savepoint's `_metadata` into its folder, atomically and durably (as a
    checkpoint's: the folder's own entry in its parent too)."""
    target = folder.child(METADATA)
    try:
        _fs.write_atomic(target, _envelope.encode(METADATA_KIND, metadata))
        _fs.sync_dir(folder.parent)
    except OSError as error:
        raise CheckpointStorageError(f"cannot write {target}: {error}") from error


class CheckpointActions:
    """Executes `CoordinatorAction`s of one attempt's coordinator, in the order given."""

    def __init__(
        self, master: CheckpointHost, attempt: Attempt, coordinator: cc.CheckpointCoordinator
    ) -> None:
        self._master = master
        self._attempt = attempt
        self.coordinator = coordinator
        self._stats = master.stats_tracker
        self._savepoints: dict[int, SavepointRequest] = {}
        """Requested savepoints by checkpoint id (kept after they end: a late ack discards)."""
        self._declines: dict[int, str] = {}
        self._shared: dict[int, list[tuple[str, int, bool]]] = {}
        """The shared files acknowledged for each pending checkpoint (name, size, new)."""
        """The first decline's detail of each checkpoint, for a failed savepoint's reason."""
        self.stop: SavepointRequest | None = None
        """The stop with savepoint under way: the final checkpoint is its savepoint."""

    def trigger_savepoint(self, request: SavepointRequest) -> None:
        """Trigger a savepoint into `request.folder` now (the coordinator must be running)."""
        actions = self.coordinator.request_savepoint(self._now())
        for action in actions:
            if isinstance(action, cc.TriggerCheckpoint) and action.is_savepoint:
                self._savepoints[action.checkpoint_id] = request
        self.carry_out(actions)

    def _folder(self, checkpoint_id: int) -> _fs.Location:
        request = self._savepoints.get(checkpoint_id)
        if request is not None:
            return request.folder
        return self._master.storage.checkpoint_dir(checkpoint_id)

    def _discard(self, checkpoint_id: int) -> None:
        """Delete an aborted checkpoint's or savepoint's folder and the shared files it
        uploaded that no retained checkpoint references; a storage error is logged and the
        folder deleted later (the storage retries it at each retention), a shared file at
        the next start's sweep."""
        self._master.storage.discard_folder(self._folder(checkpoint_id))
        acked = self._shared.pop(checkpoint_id, [])
        self._master.storage.discard_new_shared([name for name, _, new in acked if new])

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
                    checkpointed_bytes=ack.checkpointed_bytes,
                ),
            )
            self._master.publisher.mark_dirty()
            if ack.shared_files:
                self._shared.setdefault(ack.checkpoint_id, []).extend(ack.shared_files)
        elif result is cc.AcknowledgeResult.DISCARDED and ack.shared_files:
            # a late acknowledgement of an aborted checkpoint: what it uploaded goes
            new = [name for name, _, is_new in ack.shared_files if is_new]
            self._master.storage.discard_new_shared(new)
        self.carry_out(actions)

    def declined(self, decline: msg.DeclineCheckpoint) -> None:
        now = self._now()
        reason = CheckpointFailureReason[decline.reason]
        subtask = self._master.partitions[decline.partition]
        detail = f" (task {self._attempt.task_name(decline.partition)}"
        self._declines.setdefault(
            decline.checkpoint_id, detail + (f": {decline.message})" if decline.message else ")")
        )
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
                self._discard(action.checkpoint_id)
            elif isinstance(action, cc.FailJob):
                raise AttemptFailed(AttemptFailure(action.reason))
            else:
                raise TypeError(f"unknown coordinator action {action!r}")

    def _trigger(self, action: cc.TriggerCheckpoint) -> None:
        if action.is_savepoint and action.is_final and self.stop is not None:
            self._savepoints[action.checkpoint_id] = self.stop
        request = self._savepoints.get(action.checkpoint_id)
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
            target=request.folder.uri if request is not None else None,
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
            shared_files=[(n, size) for n, size, _ in self._shared.get(action.checkpoint_id, [])],
        )
        request = self._savepoints.get(action.checkpoint_id)
        try:
            if request is not None:
                write_savepoint_metadata(request.folder, metadata)
            else:
                master.storage.write_metadata(action.checkpoint_id, metadata)
        except CheckpointStorageError as error:  # a storage fault: one line, no traceback
            log.warning("finalizing checkpoint %d failed: %s", action.checkpoint_id, error)
            self.carry_out(self.coordinator.on_finalize_failed(action.checkpoint_id, self._now()))
            return
        if request is None:  # counted before retention can release an older user of its files
            master.storage.register_completed(action.checkpoint_id, metadata)
        self._shared.pop(action.checkpoint_id, None)
        self.carry_out(self.coordinator.on_checkpoint_finalized(action.checkpoint_id, self._now()))

    def _report_failed(self, action: cc.NotifyCheckpointAborted) -> None:
        stats = self._stats.report_failed(action.checkpoint_id, self._now(), action.reason)
        self._master.checkpoint_ended(stats)
        request = self._savepoints.get(action.checkpoint_id)
        if request is not None:
            detail = self._declines.get(action.checkpoint_id, "")
            self._master.savepoints.savepoint_ended(
                request, None, f"savepoint {action.checkpoint_id} failed: "
                f"{action.reason.value}{detail}"
            )  # fmt: skip

    def _completed(self, action: cc.NotifyCheckpointComplete) -> None:
        master = self._master
        folder = self._folder(action.checkpoint_id)
        stats = self._stats.report_completed(
            action.checkpoint_id, self._now(), external_path=folder.uri
        )
        master.checkpoint_stats.append(stats)
        self._attempt.send_to_all(
            msg.NotifyCheckpointComplete(
                self._attempt.number, action.checkpoint_id, action.is_final
            )
        )
        master.checkpoint_ended(stats)
        try:  # never fatal: what is left now goes at the next completed checkpoint
            master.storage.retain(master.settings.retained_checkpoints)
        except CheckpointStorageError as error:
            log.warning("retention after checkpoint %d is put off to the next checkpoint: %s",
                        action.checkpoint_id, error)  # fmt: skip
        publisher = master.publisher
        request = self._savepoints.get(action.checkpoint_id)
        if request is not None:  # a savepoint is the user's, not one of the job's checkpoints
            master.savepoints.savepoint_ended(request, folder.uri, None)
        else:
            completed = (*publisher.status.completed_checkpoints, action.checkpoint_id)
            publisher.publish(completed_checkpoints=completed)
        if action.is_final:
            publisher.publish(state=JobStatus.FINISHING)

    def abort_on_failover(self) -> None:
        """Abort every pending checkpoint; only its files go, as the tasks are being cancelled."""
        for action in self.coordinator.abort_pending_on_failover(self._now()):
            if isinstance(action, cc.NotifyCheckpointAborted):
                # A checkpoint whose trigger action was never carried out (the failure
                # came first, in the same batch of actions) never reached the tracker.
                if action.checkpoint_id in self._stats.in_progress_ids:
                    self._report_failed(action)
            elif isinstance(action, cc.DiscardState):
                self._discard(action.checkpoint_id)
