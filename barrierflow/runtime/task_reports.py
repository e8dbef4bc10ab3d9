"""TaskReports: what a `StreamTask` tells the JobMaster besides its lifecycle messages.

Metrics heartbeats, latency markers, the failure report, and `_send` (a lost JobMaster
cancels the task). Part of `StreamTask` (a base class of it), split out of
`runtime/task.py` by role; it reads the task's per-attempt fields, declared below.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from barrierflow._clock import Clock
from barrierflow._scheduler import Scheduler
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.attempt_outcome import TaskCancelled
from barrierflow.runtime.deployment import SubtaskId, TaskDescriptor, TaskSettings
from barrierflow.runtime.elements import LatencyMarker
from barrierflow.runtime.metrics.task_metrics import TaskMetrics
from barrierflow.runtime.network.record_writer import RecordWriter
from barrierflow.runtime.operator_chain import OperatorChain
from barrierflow.runtime.subtask_checkpoint import SubtaskCheckpointCoordinator
from barrierflow.runtime.task_phase import TaskPhase

__all__ = ["FIRST_RATE_MS", "TaskReports"]

log = logging.getLogger("barrierflow.runtime.task")

FIRST_RATE_MS = 200
"""How soon the second metrics report follows the first, as the task runs (see
`_report_metrics`)."""


class TaskReports:
    """The reports of a `StreamTask` to its JobMaster; mailbox thread only."""

    descriptor: TaskDescriptor
    settings: TaskSettings
    subtask: SubtaskId
    partition: int
    attempt: int
    chain: OperatorChain
    writer: RecordWriter
    metrics: TaskMetrics
    scheduler: Scheduler
    checkpoints: SubtaskCheckpointCoordinator
    _clock: Clock
    _phase: TaskPhase
    _send_rpc: Callable[[Any], None]

    def metrics_report(self) -> msg.TaskMetricsReport:
        """This attempt's metrics now (runtime/metrics)."""
        chain = self.chain
        return msg.TaskMetricsReport(
            self.attempt,
            self.partition,
            self._clock.epoch_millis(),
            self.metrics.report_values(
                chain.metrics,
                [operator.metric_group for operator in chain.operators],
                records_out=chain.records_out(),
                bytes_out=self.writer.bytes_sent(),
            ),
        )

    def _report_metrics(self, first: bool = False) -> None:
        """Send the metrics heartbeat, and schedule the next one. The first (as the task
        runs) is followed within FIRST_RATE_MS, not a whole interval later: rates come from
        two reports of the same attempt, so an attempt's rates show a moment after it runs."""
        self._send(self.metrics_report())
        interval = self.settings.metrics_interval_ms
        if interval > 0:
            delay = min(interval, FIRST_RATE_MS) if first else interval
            self.scheduler.schedule(delay, self._report_metrics, "metrics report")

    def _schedule_latency_marker(self) -> None:
        """A source task emits a latency marker every `latency_interval_ms` (if > 0)."""
        interval = self.settings.latency_interval_ms
        if interval > 0 and self.chain.source is not None:
            self.scheduler.schedule(interval, self._emit_latency_marker, "latency marker")

    def _emit_latency_marker(self) -> None:
        """Emit a latency marker after the records the source emitted so far, and schedule the
        next, until the source's input ended. None after the final checkpoint's barrier:
        nothing may follow it (one follows again if that checkpoint aborts)."""
        if self._phase.source_ended:
            return
        if not self.checkpoints.holds_final_snapshot:
            subtask = self.subtask
            self.chain.emit_latency_marker(
                LatencyMarker(self._clock.epoch_millis(), subtask.vertex_id, subtask.subtask_index)
            )
        self._schedule_latency_marker()

    def _report_failure(self, error: Exception) -> bool:
        """Tell the JobMaster why this task failed; True if it heard it (then the Spark task
        ends quietly instead of adding a second copy of the traceback to the executor log)."""
        name = self.descriptor.vertex_name
        position = (self.subtask.subtask_index + 1, self.descriptor.parallelism)
        # The JobMaster reports every failure in one line, naming the root cause; this line
        # is for the executor's log only (INFO), or a warning when the JobMaster is gone.
        log.info("task %s (%d/%d) failed: %s", name, *position, error)
        source = self.chain.source
        position = None if source is None else source.failed_at
        try:
            self._send(
                msg.TaskFailed(
                    self.settings.attempt,
                    self.partition,
                    msg.TaskFailure.of(error, name, position),
                )
            )
        except TaskCancelled:
            return False
        return True

    def _send(self, message: Any) -> None:
        """Send on the mailbox thread; a lost JobMaster cancels the task."""
        try:
            self._send_rpc(message)
        except OSError as error:
            raise TaskCancelled(f"lost the connection to the JobMaster: {error}") from error
