"""The JobMaster's restart loop: run attempts until the job finishes, fails or is cancelled.

The JobMaster lives in the Spark driver. One thread (`run`) owns all state and
takes typed mails (mails.py) from one queue: task messages and lost connections
(posted by RPC reader threads), the end of an attempt's Spark job (posted by the
runner), and cancel requests (posted by the JobClient). It waits only on that
queue; delays (the restart delay, the registration timeout, the coordinator's
tick) are actions on its `Scheduler`, read from one injected `Clock`.

A message of an attempt other than the current one is refused by its number, so
zombies cannot touch a newer attempt; a mail or message of an unknown type is an
error. Any unexpected error fails the job: status FAILED, the Spark job cancelled,
every RPC connection closed, and a JobExecutionError raised with the error chained.

A failure that leaves every task process alive rolls back in place (rollback.py): the
tasks end the attempt and run the next one in the same Spark job; otherwise the Spark
job is cancelled and the next attempt is a new barrier stage.

The JobMaster is split by role: this module holds its state, its mailbox loop and what
other threads call; its roles are objects it owns, each seeing it only through a narrow
Protocol (hosts.py): how the job and each attempt start is `JobStart` (job_start.py), how a
failover decision (failover.py, pure) is applied `JobFailover` (job_failover.py), how the
job ends `JobEnd` (job_end.py). What one attempt does is in attempt.py, carrying out the
coordinator's actions in checkpoint_actions.py, the published status and REST view in
job_view.py, what each attempt restores in job_restore.py. The JobMaster implements the
job's actions (rest/job_actions.py); its savepoint and stop-with-savepoint operations are
savepoint_requests.py.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import secrets
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow._scheduler import ScheduledAction, Scheduler
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.lease import CheckpointLease, this_process
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsStatus,
    CheckpointStatsTracker,
    TaskVertexInfo,
)
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.cluster.chaos_faults import ChaosArms
from barrierflow.cluster.executor.task_console import print_task_output
from barrierflow.cluster.executor.task_logs import JobLogs
from barrierflow.cluster.jobmaster.attempt import Attempt
from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailed
from barrierflow.cluster.jobmaster.failover import FailoverDecider
from barrierflow.cluster.jobmaster.job_end import JobEnd
from barrierflow.cluster.jobmaster.job_failover import JobFailover
from barrierflow.cluster.jobmaster.job_restore import JobRestore
from barrierflow.cluster.jobmaster.job_settings import JobSettings
from barrierflow.cluster.jobmaster.job_start import JobStart
from barrierflow.cluster.jobmaster.job_view import JobPublisher, StatusSnapshot
from barrierflow.cluster.jobmaster.repeated_failures import RepeatedFailures
from barrierflow.cluster.jobmaster.restore_point import RestorePoint
from barrierflow.cluster.jobmaster.rollback import InPlaceRollback
from barrierflow.cluster.jobmaster.savepoint_requests import SavepointRequests
from barrierflow.cluster.jobmaster.views import JobStatus, SavepointOperation
from barrierflow.cluster.log_dir import job_log_dir
from barrierflow.cluster.mails import (
    CancelRequested,
    FailureInjectionRequested,
    Mail,
    SavepointRequested,
    SparkJobEnded,
    SparkTasksLaunched,
    TaskConnection,
    TaskConnectionLost,
    TaskMessageReceived,
)
from barrierflow.cluster.metrics.store import MetricsStore
from barrierflow.cluster.rpc import RpcEndpoint, RpcFactory, RpcServer
from barrierflow.cluster.spark.runner import AttemptRunner, RunnerFactory, SparkAttemptRunner
from barrierflow.connectors.base import SourceSplit
from barrierflow.errors import CheckpointStorageError
from barrierflow.graph.job_graph import JobGraph, SubtaskId
from barrierflow.runtime import task_messages as msg

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0
"""The longest the JobMaster blocks on its mailbox when nothing is scheduled."""

__all__ = ["CheckpointStats", "JobMaster", "JobSettings", "JobStatus", "StatusSnapshot"]
# CheckpointStats (checkpoint/stats.py) is what JobExecutionResult.checkpoints holds.


class JobMaster:
    """The restart loop of one job. `run` on one thread; the rest may be called from any.

    Guarantees the job ends in exactly one of FINISHED (run returns the completed
    checkpoints' statistics), FAILED or CANCELED (run raises JobExecutionError with
    the root cause chained), and that when it ends no attempt's tasks are left
    running. Assumes the Spark runner posts one SparkJobEnded per submitted attempt.
    Its roles (`starting`, `failing_over`, `ending`) work on the state set here through
    their Protocols (hosts.py).
    """

    def __init__(
        self,
        graph: JobGraph,
        settings: JobSettings,
        *,
        clock: Clock = SYSTEM_CLOCK,
        connect_runner: RunnerFactory = SparkAttemptRunner.connect,
        start_rpc: RpcFactory = RpcServer,
    ) -> None:
        self.graph = graph
        self.settings = settings
        self.clock = clock
        self.scheduler = Scheduler(clock)
        self.job_id = uuid.uuid4().hex
        self.run_id = uuid.uuid4().hex[:8]
        self.secret = secrets.token_bytes(32)
        self.action_token = secrets.token_urlsafe(32)
        """What the REST endpoint's actions (and the dashboard's) need: shown only to the user
        who started the job (its console, the per-user job registry)."""
        self.log_dir = (
            Path(settings.log_dir) if settings.log_dir else job_log_dir(graph.job_name, self.job_id)
        )
        """The job's log folder on the driver (cluster/log_dir.py)."""
        self.logs: JobLogs | None = None
        self.storage = FileSystemCheckpointStorage(settings.checkpoint_storage, graph.job_name)
        self.partitions = tuple(graph.all_subtasks())
        self.sources = list(graph.source_subtasks())
        self.mailbox: queue.SimpleQueue[Mail] = queue.SimpleQueue()
        self.checkpoint_stats: list[CheckpointStats] = []
        """Every completed checkpoint of this run, in order (JobExecutionResult.checkpoints)."""
        self.stats_tracker = CheckpointStatsTracker(
            TaskVertexInfo(v.vertex_id, v.name, v.parallelism) for v in graph.vertices
        )
        self.history = CheckpointHistoryFile(self.storage.job_dir)
        self.publisher = JobPublisher(
            self.job_id, graph, settings, self.storage.job_dir.uri, self.stats_tracker, clock
        )
        self.metrics = MetricsStore(
            ((v.vertex_id, v.name, v.parallelism) for v in graph.vertices), clock
        )
        """The tasks' metrics reports: rates, aggregates, history (published for REST)."""
        self.spark_tasks: dict[SubtaskId, tuple[str, int]] = {}
        """(host, pid) of each subtask's Spark task, which supervises its stream task's process."""
        self.attempt: Attempt | None = None
        """The attempt running now; None before the first, during a restart delay, at the end."""
        self.connect_runner = connect_runner
        self.start_rpc = start_rpc
        self.runner: AttemptRunner | None = None
        self.rpc: RpcEndpoint | None = None
        self.rest: Any = None
        self.restart: ScheduledAction | None = None
        """The next attempt's start during a restart delay."""
        self.failover: FailoverDecider | None = None
        """Decides each failure (failover.py); made in `prepare` with the strategy's tracker."""
        self.rollback: InPlaceRollback | None = None
        """The tasks kept during the restart delay of a roll-back in place."""
        self.stage = 0
        """The attempt whose Spark job (barrier stage) runs the tasks now."""
        self.cancel_requested: str | None = None
        self.first_checkpoint_id = 1
        self.lineage = ""
        """The checkpoint folder's lineage (checkpoint/lineage.py), read in `prepare`."""
        self.outcome: list[CheckpointStats] | BaseException | None = None
        self.ended = False
        self.lease = CheckpointLease(
            self.storage.job_dir,
            this_process(self.job_id, self.run_id, graph.job_name),
            clock,
            expiry_ms=settings.lease_expiry_ms,
        )
        """This run's hold on the job's checkpoint folder (checkpoint/lease.py): taken first in
        `prepare`, renewed on the scheduler, released in `close`. Whatever sweeps or deletes
        in the folder or the sinks (retention, restores' sweeps) runs only while it is held."""
        self.restoring = JobRestore(graph, settings, self.storage, self.history)
        self.chaos = ChaosArms(self.storage.job_dir)
        """What `barrierflow chaos` armed for the next restore (kinds restore, storage)."""
        self.repeated_failures = RepeatedFailures(settings.repeated_failure_limit)
        """Fails the job on a record that always fails (the same failure from one restore
        point, again and again), whatever the restart strategy."""
        self.savepoints = SavepointRequests(
            self.job_id, graph.job_name, self.publisher, self._default_savepoint_root,
            self.mailbox.put,
        )  # fmt: skip
        self.starting = JobStart(self, self._new_attempt, actions=self)
        self.failing_over = JobFailover(self)
        self.ending = JobEnd(self)

    # ---- any thread --------------------------------------------------------------------------

    @property
    def status(self) -> StatusSnapshot:
        return self.publisher.status

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        self.mailbox.put(CancelRequested(reason))

    def trigger_savepoint(self, target_dir: str | None) -> str:
        """A savepoint into `target_dir` (None: the job's default); its trigger id at once."""
        return self.savepoints.request(target_dir, stop=False, drain=False, ended=self.ended)

    def stop_with_savepoint(self, target_dir: str | None, drain: bool) -> str:
        """Stop the sources (`drain`: event time to the end first), take a savepoint as the
        final checkpoint, let the sinks commit, end FINISHED; its trigger id at once."""
        return self.savepoints.request(target_dir, stop=True, drain=drain, ended=self.ended)

    def savepoint_operation(self, trigger_id: str) -> SavepointOperation | None:
        return self.publisher.operation(trigger_id)

    def _default_savepoint_root(self) -> _fs.Location:
        """Where a savepoint goes when its request names no folder."""
        base = self.settings.savepoint_dir
        return _fs.location(base) if base else self.storage.root.child("savepoints")

    def wait_for(self, predicate: Callable[[StatusSnapshot], bool], timeout: float) -> bool:
        return self.publisher.wait_for(predicate, timeout)

    def wake_waiters(self) -> None:
        self.publisher.wake_waiters()

    # ---- the JobMaster thread ------------------------------------------------------------------

    def run(self) -> list[CheckpointStats]:
        """Run the job to its end; raises JobExecutionError if it failed or was cancelled."""
        self.start()
        try:
            while not self.ended:
                self.step(self.scheduler.wait_s(IDLE_WAIT_S))
        finally:
            self.close()
        return self.result()

    def start(self) -> None:
        """Prepare the job and submit attempt 0. A job that cannot start (its source, sink or
        checkpoint storage is unusable) raises that error as it is, with status FAILED."""
        try:
            self.starting.prepare()
        except BaseException:
            if self.attempt is not None:
                with contextlib.suppress(Exception):
                    self.stop_attempt()
            self.publisher.publish(state=JobStatus.FAILED)
            self.close()
            raise

    def step(self, block_s: float) -> None:
        """Handle at most one mail (waiting up to `block_s` for it), then every due action."""
        try:
            mail = self.mailbox.get(timeout=block_s) if block_s > 0 else self.mailbox.get_nowait()
        except queue.Empty:
            mail = None
        if mail is not None:
            self._guarded(lambda: self._dispatch(mail))
        self._guarded(self.scheduler.run_due)

    def drain(self) -> None:
        """Handle every mail posted so far and every due action, without blocking (tests)."""
        while not self.ended and not self.mailbox.empty():
            self.step(0)
        self._guarded(self.scheduler.run_due)

    def result(self) -> list[CheckpointStats]:
        """The completed checkpoints of a finished job; raises the error of a failed one."""
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        assert self.outcome is not None, "the job has not ended"
        return self.outcome

    def close(self) -> None:
        """Close the RPC endpoint (every task connection), release the checkpoint folder's
        lease, close the REST endpoint and the log files."""
        self.chaos.close()
        if self.rpc is not None:
            self.rpc.close()
        self.starting.stop_renewing_lease()
        self.lease.release()  # before the REST endpoint lingers: a rerun may start at once
        if self.rest is not None:
            self.rest.close()
            self.rest = None
            self.publisher.publish(rest_url=None)
        if self.logs is not None:
            self.logs.close()
            self.logs = None

    def _guarded(self, work: Callable[[], Any]) -> None:
        """Run `work`: an attempt's failure goes to the restart decision, anything else
        unexpected fails the job (the crash path)."""
        if self.ended:
            return
        try:
            try:
                work()
            except AttemptFailed as failed:
                self.failing_over.attempt_failed(failed.failure)
        except Exception as error:
            self.ending.crash(error)

    def _dispatch(self, mail: Mail) -> None:
        if isinstance(mail, TaskMessageReceived):
            self._on_task_message(mail.conn, mail.message)
        elif isinstance(mail, TaskConnectionLost):
            if self.attempt is not None:
                self.attempt.on_connection_lost(mail.conn)
            elif self.rollback is not None:
                self.rollback.connection_lost(mail.conn)
                self.failing_over.abandon_rollback_if_broken()
        elif isinstance(mail, SparkJobEnded):
            if self.attempt is None or mail.attempt != self.stage:
                log.debug("the Spark job of attempt %d ended (no longer current)", mail.attempt)
                if self.rollback is not None:
                    self.rollback.spark_job_ended(mail.attempt)
                    self.failing_over.abandon_rollback_if_broken()
                return
            self.attempt.on_spark_job_ended(mail.error)
        elif isinstance(mail, SparkTasksLaunched):
            if self.attempt is not None and mail.attempt == self.stage:
                self.attempt.on_spark_tasks_launched()
        elif isinstance(mail, CancelRequested):
            self._on_cancel(mail.reason)
        elif isinstance(mail, FailureInjectionRequested):
            if self.attempt is not None and self.attempt.number == mail.attempt:
                self.chaos.arm(mail.arm, mail.subtask, mail.reason, self.partitions)
                self.attempt.inject_failure(mail.subtask, mail.reason)
        elif isinstance(mail, SavepointRequested):
            self.savepoints.on_requested(mail, self.attempt)
        else:
            raise TypeError(f"the JobMaster got a mail of unknown type: {mail!r}")

    def attempt_finished(self, attempt: Attempt) -> None:
        """Every task of `attempt` finished and its Spark job ended: the job is done."""
        if attempt is self.attempt:
            self.attempt = None
            self.savepoints.job_finished()
            # Every task sent its last metrics before finishing: publish them now, not at
            # the next 200 ms tick that never comes, so a finished job's view is its last.
            self.metrics.publish()
            self.publisher.publish(state=JobStatus.FINISHED)
            self.ending.end(self.checkpoint_stats)

    def _on_task_message(self, conn: TaskConnection, message: Any) -> None:
        if type(message) not in msg.TASK_TO_JOBMASTER:
            raise TypeError(f"a task sent a message of unknown type: {message!r}")
        if isinstance(message, msg.TaskLogRecords):  # whatever the attempt: see the message
            if self.logs is not None:
                self.logs.write(message)
            return
        if isinstance(message, msg.TaskConsoleOutput):  # whatever the attempt: printed
            print_task_output(message)
            return
        if self.attempt is None or message.attempt != self.attempt.number:
            log.debug("refused %s: the current attempt is not %d", message, message.attempt)
            if isinstance(message, msg.RegisterTask):
                conn.close()  # a zombie of an earlier attempt
            return
        self.attempt.on_task_message(conn, message)

    def _on_cancel(self, reason: str) -> None:
        self.cancel_requested = reason
        if self.attempt is not None:
            self.attempt.cancel(reason)
        elif self.restart is not None:  # during the restart delay: no attempt to stop
            self.restart.cancel()
            self.failing_over.leave_stage(reason)
            self.ending.end_cancelled()

    def stop_attempt(self) -> int:
        """Stop the current attempt's tasks and Spark job; returns its number."""
        attempt, self.attempt = self.attempt, None
        assert attempt is not None and self.runner is not None
        try:
            attempt.stop()
        finally:
            self.runner.cancel(self.spark_group(self.stage))
        return attempt.number

    def spark_group(self, number: int) -> str:
        """The Spark job group of attempt `number`'s barrier stage (what is cancelled)."""
        return f"barrierflow-{self.job_id}-{number}"

    def _new_attempt(
        self,
        number: int,
        splits: dict[SubtaskId, list[SourceSplit]],
        latest: RestorePoint | None,
        connections: dict[int, TaskConnection] | None,
    ) -> Attempt:
        """Attempt `number` over this JobMaster (seen as its AttemptHost): JobStart's factory.
        A new Spark stage waits for Spark to start its tasks if the runner reports that."""
        awaiting_launch = connections is None and self.runner is not None
        awaiting_launch = awaiting_launch and self.runner.reports_launches
        return Attempt(self, number, splits, latest, connections, awaiting_launch)

    # ---- checkpoints of the job (across attempts) --------------------------------------------

    def next_checkpoint_id(self) -> int:
        """Above every id used in this job's folder, its history, this run, and the
        savepoint this run started from (ids never go back: Flink's rule)."""
        return max(
            self.storage.next_checkpoint_id(),
            self.first_checkpoint_id,
            (self.stats_tracker.highest_triggered_id or 0) + 1,
        )

    def checkpoint_ended(self, stats: CheckpointStats) -> None:
        """Log a finished checkpoint and append it to the persisted history."""
        log.info("job '%s': %s", self.graph.job_name, stats.describe())
        try:
            self.history.append(stats, job_id=self.job_id)
        except CheckpointStorageError as error:
            log.warning("checkpoint %d is missing from the history: %s", stats.checkpoint_id, error)
        self.publisher.mark_dirty()
        if stats.status is CheckpointStatsStatus.COMPLETED:
            self.failover.progressed()
        if stats.status is CheckpointStatsStatus.COMPLETED and not stats.is_savepoint:
            self.restoring.release_claimed(self.checkpoint_stats)
