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

What one attempt does is in attempt.py, carrying out the coordinator's actions in
checkpoint_actions.py, the published status and REST view in job_view.py, what each attempt
restores in job_restore.py. The JobMaster implements the job's actions (job_actions.py); its
savepoint and stop-with-savepoint operations are savepoint_requests.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import secrets
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark import cloudpickle

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow._scheduler import ScheduledAction, Scheduler
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.lease import CheckpointLease, probe_process, this_process
from barrierflow.checkpoint.lease_rules import ProcessState
from barrierflow.checkpoint.lineage import job_lineage
from barrierflow.checkpoint.metadata import is_savepoint
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsStatus,
    CheckpointStatsTracker,
    TaskVertexInfo,
)
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.cluster.chaos_faults import ChaosArms
from barrierflow.cluster.executor.task_logs import JobLogs
from barrierflow.cluster.jobmaster.attempt import Attempt
from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailed, AttemptFailure
from barrierflow.cluster.jobmaster.job_preparation import (
    create_splits,
    prepare_sinks,
    shippable_graph,
)
from barrierflow.cluster.jobmaster.job_restore import JobRestore
from barrierflow.cluster.jobmaster.job_settings import JobSettings
from barrierflow.cluster.jobmaster.job_view import JobPublisher, JobStatus
from barrierflow.cluster.jobmaster.repeated_failures import RepeatedFailures
from barrierflow.cluster.jobmaster.restore_point import GiveUp
from barrierflow.cluster.jobmaster.rollback import InPlaceRollback, roll_back
from barrierflow.cluster.jobmaster.savepoint_requests import SavepointRequests
from barrierflow.cluster.jobmaster.shared_storage import check_job_storage
from barrierflow.cluster.jobmaster.sink_cleanup import clean_up_sinks
from barrierflow.cluster.jobmaster.views import FailureEntry, SavepointOperation
from barrierflow.cluster.log_dir import job_log_dir
from barrierflow.cluster.mails import (
    CancelRequested,
    FailureInjectionRequested,
    Mail,
    SavepointRequested,
    SparkJobEnded,
    TaskConnection,
    TaskConnectionLost,
    TaskMessageReceived,
)
from barrierflow.cluster.metrics.store import MetricsStore
from barrierflow.cluster.rest.server import resolve_rest_port
from barrierflow.cluster.rest.startup import start_rest_endpoint
from barrierflow.cluster.rpc import RpcEndpoint, RpcFactory, RpcServer
from barrierflow.cluster.spark.runner import AttemptRunner, RunnerFactory, SparkAttemptRunner
from barrierflow.core.restart_strategies import RestartDecision
from barrierflow.errors import (
    CheckpointStorageError,
    CheckpointStorageUnavailableError,
    JobExecutionError,
    LeaseLostError,
    StateRestoreError,
)
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.graph.job_graph import JobGraph, SubtaskId
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.task import TaskSettings

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0
"""The longest the JobMaster blocks on its mailbox when nothing is scheduled."""
TASKS_GONE_TIMEOUT_S = 30.0
"""How long a job's end waits for its tasks to be gone before it cleans up the sinks."""
DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
"""The externalized retention (JobSettings) that deletes the job's checkpoints on cancel."""

__all__ = ["CheckpointStats", "JobMaster", "JobSettings", "JobStatus"]
# CheckpointStats (checkpoint/stats.py) is what JobExecutionResult.checkpoints holds.


class JobMaster:
    """The restart loop of one job. `run` on one thread; the rest may be called from any.

    Guarantees the job ends in exactly one of FINISHED (run returns the completed
    checkpoints' statistics), FAILED or CANCELED (run raises JobExecutionError with
    the root cause chained), and that when it ends no attempt's tasks are left
    running. Assumes the Spark runner posts one SparkJobEnded per submitted attempt.
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
        self._connect_runner = connect_runner
        self._start_rpc = start_rpc
        self._runner: AttemptRunner | None = None
        self._rpc: RpcEndpoint | None = None
        self._rest: Any = None
        self._restart: ScheduledAction | None = None
        self._rollback: InPlaceRollback | None = None
        """The tasks kept during the restart delay of a roll-back in place."""
        self._stage = 0
        """The attempt whose Spark job (barrier stage) runs the tasks now."""
        self._cancel_requested: str | None = None
        self._sinks_cleaned = False
        """The sinks were cleaned up (or that was tried) at the job's end: once only."""
        self._first_checkpoint_id = 1
        self.lineage = ""
        """The checkpoint folder's lineage (checkpoint/lineage.py), read in `_prepare`."""
        self._outcome: list[CheckpointStats] | BaseException | None = None
        self.ended = False
        self.lease = CheckpointLease(
            self.storage.job_dir,
            this_process(self.job_id, self.run_id, graph.job_name),
            clock,
            expiry_ms=settings.lease_expiry_ms,
        )
        """This run's hold on the job's checkpoint folder (checkpoint/lease.py): taken first in
        `_prepare`, renewed on the scheduler, released in `close`. Whatever sweeps or deletes
        in the folder or the sinks (retention, restores' sweeps) runs only while it is held."""
        self._lease_renewal: ScheduledAction | None = None
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

    # ---- any thread --------------------------------------------------------------------------

    @property
    def status(self) -> JobStatus:
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

    def wait_for(self, predicate: Callable[[JobStatus], bool], timeout: float) -> bool:
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
            self._prepare()
        except BaseException:
            if self.attempt is not None:
                with contextlib.suppress(Exception):
                    self._stop_attempt()
            self.publisher.publish(state="FAILED")
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
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        assert self._outcome is not None, "the job has not ended"
        return self._outcome

    def close(self) -> None:
        """Close the RPC endpoint (every task connection), release the checkpoint folder's
        lease, close the REST endpoint and the log files."""
        self.chaos.close()
        if self._rpc is not None:
            self._rpc.close()
        if self._lease_renewal is not None:
            self._lease_renewal.cancel()
        self.lease.release()  # before the REST endpoint lingers: a rerun may start at once
        if self._rest is not None:
            self._rest.close()
            self._rest = None
            self.publisher.publish(rest_url=None)
        if self.logs is not None:
            self.logs.close()
            self.logs = None

    def _prepare(self) -> None:
        rest_port = resolve_rest_port(self.settings.rest_port, os.environ)
        try:
            self.logs = JobLogs(self.log_dir, self.partitions)
        except OSError as error:
            log.warning("job '%s' keeps no log files: %s", self.graph.job_name, error)
        self.lease.acquire()  # first: a refused second start leaves no trace in the folder
        self._splits = create_splits(self.graph)
        prepare_sinks(self.graph)
        self.storage.prepare()
        try:  # before any task deploys: no upload of this run can be in shared/ yet
            self.storage.open_shared_state()
        except CheckpointStorageError as error:  # files stay: swept at a later start
            log.warning("job '%s': shared checkpoint files not swept: %s",
                        self.graph.job_name, error)  # fmt: skip
        self.lineage = job_lineage(self.storage.job_dir)
        self._first_checkpoint_id = self.history.first_unused_id()
        self.restoring.run_first_checkpoint_id = self.next_checkpoint_id()
        if self.restoring.from_savepoint:
            point = self.restoring.choose()  # a missing, damaged or refused one fails now
            if point is not None:  # ids go on above the snapshot, whatever the folder holds
                self._first_checkpoint_id = max(self._first_checkpoint_id,
                                                point.checkpoint_id + 1)  # fmt: skip
                self.restoring.run_first_checkpoint_id = self.next_checkpoint_id()
        self._descriptors = build_task_descriptors(shippable_graph(self.graph))
        self._runner = self._connect_runner(
            self.settings.master, len(self.partitions), self.graph.job_name, self.mailbox.put
        )
        if self.logs is not None:
            self._runner.log_to(self.log_dir)
        check_job_storage(self.graph, self.settings, self._runner.executor_hosts)
        addresses = self._runner.addresses
        self.publisher.spark_ui = getattr(self._runner, "spark_ui_url", None)
        self._rpc = self._start_rpc(
            addresses.rpc_bind, self.secret, self.mailbox.put, job_id=self.job_id
        )
        self.publisher.publish_view()
        publisher, host = self.publisher, addresses.rpc_bind
        self._rest = start_rest_endpoint(
            self.graph.job_name,
            self.job_id,
            host,
            rest_port,
            lambda: publisher.view,
            actions=self,
            token=self.action_token,
            get_metrics=lambda: self.metrics.snapshot,
        )
        if self._rest is not None:
            self.publisher.publish(rest_url=self._rest.url)
        self._restart_tracker = self.settings.restart_strategy.new_tracker()
        self._renew_lease()  # names the REST address; still ours after Spark's start?
        self._start_attempt(0)

    def _renew_lease(self) -> None:
        """Renew the lease (raises LeaseLostError if another run took it) and schedule the
        next renewal."""
        self.lease.renew(self._rest.url if self._rest is not None else None)
        if self._lease_renewal is not None:  # renewed early: the next one counts from now
            self._lease_renewal.cancel()
        self._lease_renewal = self.scheduler.schedule(
            self.settings.lease_renew_interval_ms, self._on_lease_renewal, "renew the lease"
        )

    def _on_lease_renewal(self) -> None:
        try:
            self._renew_lease()
        except LeaseLostError as lost:
            self._lease_lost(lost)

    def _lease_lost(self, error: LeaseLostError) -> None:
        """Another run took the folder over: stop every task at once and fail, touching
        nothing more (no cleanup: the folder and the sinks' leftovers are the other run's)."""
        if self.attempt is not None:
            self._stop_attempt()
        if self._restart is not None:
            self._restart.cancel()
        self._leave_stage(str(error))
        self._fail_job(error)

    def _guarded(self, work: Callable[[], Any]) -> None:
        """Run `work`: an attempt's failure goes to the restart decision, anything else
        unexpected fails the job (the crash path)."""
        if self.ended:
            return
        try:
            try:
                work()
            except AttemptFailed as failed:
                self._attempt_failed(failed.failure)
        except Exception as error:
            self._crash(error)

    def _dispatch(self, mail: Mail) -> None:
        if isinstance(mail, TaskMessageReceived):
            self._on_task_message(mail.conn, mail.message)
        elif isinstance(mail, TaskConnectionLost):
            if self.attempt is not None:
                self.attempt.on_connection_lost(mail.conn)
            elif self._rollback is not None:
                self._rollback.connection_lost(mail.conn)
                self._abandon_rollback_if_broken()
        elif isinstance(mail, SparkJobEnded):
            if self.attempt is None or mail.attempt != self._stage:
                log.debug("the Spark job of attempt %d ended (no longer current)", mail.attempt)
                if self._rollback is not None:
                    self._rollback.spark_job_ended(mail.attempt)
                    self._abandon_rollback_if_broken()
                return
            self.attempt.on_spark_job_ended(mail.error)
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
            self.publisher.publish(state="FINISHED")
            self._end(self.checkpoint_stats)

    def _on_task_message(self, conn: TaskConnection, message: Any) -> None:
        if type(message) not in msg.TASK_TO_JOBMASTER:
            raise TypeError(f"a task sent a message of unknown type: {message!r}")
        if isinstance(message, msg.TaskLogRecords):  # whatever the attempt: see the message
            if self.logs is not None:
                self.logs.write(message)
            return
        if self.attempt is None or message.attempt != self.attempt.number:
            log.debug("refused %s: the current attempt is not %d", message, message.attempt)
            if isinstance(message, msg.RegisterTask):
                conn.close()  # a zombie of an earlier attempt
            return
        self.attempt.on_task_message(conn, message)

    def _on_cancel(self, reason: str) -> None:
        self._cancel_requested = reason
        if self.attempt is not None:
            self.attempt.cancel(reason)
        elif self._restart is not None:  # during the restart delay: no attempt to stop
            self._restart.cancel()
            self._leave_stage(reason)
            self._end_cancelled()

    def _start_attempt(self, number: int) -> None:
        """Start attempt `number`: in place in the kept tasks after a roll-back, else as a
        new Spark job."""
        self._restart = None
        rollback, self._rollback = self._rollback, None
        try:
            latest = self.restoring.choose()
        except CheckpointStorageUnavailableError as error:  # not damage: wait for the storage
            if rollback is not None:
                rollback.stop(str(error))
            self._restore_unreadable(number, error)
            return
        except (StateRestoreError, CheckpointStorageError) as error:
            if number == 0:
                raise  # the job cannot start: run() raises it as it is
            if rollback is not None:
                rollback.stop(str(error))
            self._fail_job(error)
            return
        if latest is not None:
            self.stats_tracker.report_restored(
                latest.checkpoint_id,
                self.clock.epoch_millis(),
                external_path=latest.folder.uri,
                is_savepoint=is_savepoint(latest.metadata),
            )
        assert self._runner is not None and self._rpc is not None
        addresses = self._runner.addresses
        settings = self.settings.task_settings(
            self.job_id,
            number,
            f"{self.run_id}-{number}",
            self.secret,
            (addresses.rpc_advertised, self._rpc.address[1]),
            addresses.task_bind,
            self.storage.job_dir.uri,
            self.partitions,
            lineage=self.lineage,
        )
        restored_from = latest.checkpoint_id if latest else None
        self.metrics.attempt_started(number)
        if rollback is not None:  # the same processes register again
            self.publisher.publish(state="DEPLOYING", attempt=number, restored_from=restored_from)
            self.attempt = Attempt(self, number, self._splits, latest, rollback.connections)
            rollback.restart(settings)
            return
        self.publisher.publish(
            state="DEPLOYING", attempt=number, processes={}, restored_from=restored_from
        )
        self.attempt = Attempt(self, number, self._splits, latest)
        self._stage = number
        self._runner.submit(self._payload(settings), self._group(number), number)

    def _restore_unreadable(self, number: int, error: CheckpointStorageUnavailableError) -> None:
        """The storage failed to answer while attempt `number` chose what to restore: the
        restart strategy alone decides, and the next attempt reads the same checkpoint."""
        decision = self._restart_tracker.decide(self.clock.epoch_millis())
        name = self.graph.job_name
        self._record_failure(AttemptFailure(str(error), error), number, "new-stage" if
                             decision.restart else "none", decision.delay_ms,
                             decision.explanation)  # fmt: skip
        if not decision.restart:
            self._fail_job(error)
            return
        log.warning("job '%s': %s; retrying through the restart strategy (%s) in %d ms",
                    name, error, decision.explanation, decision.delay_ms)  # fmt: skip
        self.publisher.publish(state="RESTARTING")
        self._restart = self.scheduler.schedule(
            decision.delay_ms,
            lambda: self._start_attempt(number + 1),
            f"restart as attempt {number + 1}",
        )

    def _payload(self, settings: TaskSettings) -> bytes:
        """What every Spark task of an attempt unpacks (task_entry.py)."""
        return cloudpickle.dumps((self._descriptors, settings))

    def _group(self, number: int) -> str:
        return f"barrierflow-{self.job_id}-{number}"

    def _stop_attempt(self) -> int:
        """Stop the current attempt's tasks and Spark job; returns its number."""
        attempt, self.attempt = self.attempt, None
        assert attempt is not None and self._runner is not None
        try:
            attempt.stop()
        finally:
            self._runner.cancel(self._group(self._stage))
        return attempt.number

    def _abandon_rollback_if_broken(self) -> None:
        """A process or the Spark job was lost during a roll-back: the next attempt takes a new
        stage, and the kept tasks and Spark job go now, freeing their slots."""
        if self._rollback is not None and self._rollback.broken is not None:
            log.info("job '%s': %s", self.graph.job_name, self._rollback.broken)
            self._leave_stage(self._rollback.broken)

    def _leave_stage(self, reason: str) -> None:
        rollback, self._rollback = self._rollback, None
        if rollback is not None:
            rollback.stop(reason)

    def _attempt_failed(self, failure: AttemptFailure) -> None:
        assert self.attempt is not None and self._runner is not None
        self.savepoints.attempt_failed(failure.summary)
        number, cancel, group = self.attempt.number, self._runner.cancel, self._group(self._stage)
        decision = None
        if self._cancel_requested is None and failure.fatal and failure.cause is not None:
            self._record_failure(failure, number, "none", None, "no restart can help")
            self._stop_attempt()
            self._fail_job(failure.cause)
            return
        if self._cancel_requested is None:
            ran = self.attempt.checkpoints is not None
            decision = self.restoring.failure_decision(ran, failure)
            if isinstance(decision, GiveUp):
                self._record_failure(failure, number, "none", None, str(decision.error))
                self._stop_attempt()
                log.warning("job '%s' attempt %d failed: %s", self.graph.job_name, number,
                            failure.summary)  # fmt: skip
                self._fail_job(decision.error)
                return
            if decision is None:
                decision = self._restart_decision(failure)
        if decision is not None and decision.restart:
            rollback = roll_back(self.attempt, self._stage, failure, decision.delay_ms,
                                 lambda: cancel(group))  # fmt: skip
            if rollback is not None:
                self.attempt, self._rollback = None, rollback
                self._abandon_rollback_if_broken()
        if self.attempt is not None:
            self._stop_attempt()
        if decision is None:
            self._end_cancelled()
            return
        name = self.graph.job_name
        recovery = "in-place" if self._rollback is not None else "new-stage"
        if not decision.restart:
            self._record_failure(failure, number, "none", None, decision.explanation)
            log.warning("job '%s' attempt %d failed: %s", name, number, failure.summary)
            self.publisher.publish(state="FAILED")
            self._end(_job_error(f"{failure.summary}; job '{name}' failed and will not restart "
                                 f"({decision.explanation})", failure.cause))  # fmt: skip
            return
        log.warning(
            "job '%s' attempt %d failed: %s; %s, %s in %d ms",
            name,
            number,
            failure.summary,
            decision.explanation,
            "restarting in place" if recovery == "in-place" else "restarting in a new stage",
            decision.delay_ms,
        )
        self._record_failure(failure, number, recovery, decision.delay_ms, decision.explanation)
        self.publisher.publish(state="RESTARTING")
        self._restart = self.scheduler.schedule(
            decision.delay_ms,
            lambda: self._start_attempt(number + 1),
            f"restart as attempt {number + 1}",
        )

    def _restart_decision(self, failure: AttemptFailure) -> RestartDecision:
        """The restart strategy's decision, unless it would restart though the same failure
        keeps coming back from the same restore point (a record that always fails): then the
        job fails (a strategy that gives up anyway keeps its own explanation)."""
        point = self.restoring.point
        restored = None if point is None else point.candidate.describe()
        give_up = self.repeated_failures.failed(restored, failure.signature)
        decision = self._restart_tracker.decide(self.clock.epoch_millis())
        if decision.restart and give_up is not None:
            return RestartDecision(False, 0, give_up)
        return decision

    def _record_failure(
        self, failure: AttemptFailure, attempt: int, recovery: str, delay_ms: int | None,
        explanation: str,
    ) -> None:  # fmt: skip
        """Add the failure to the exception history the REST endpoint shows."""
        exception = None if failure.cause is None else type(failure.cause).__name__
        self.publisher.record_failure(FailureEntry(
            self.clock.epoch_millis(), attempt, failure.summary, exception, failure.task,
            failure.traceback, recovery, delay_ms, explanation,
        ))  # fmt: skip

    def _fail_job(self, error: BaseException) -> None:
        """End the job FAILED with `error` (the current attempt, if any, already stopped)."""
        log.warning("job '%s' failed: %s", self.graph.job_name, error)
        self.publisher.publish(state="FAILED")
        self._end(_job_error(f"job '{self.graph.job_name}' failed: {error}", error))

    def _end_cancelled(self) -> None:
        self._clean_up_sinks()  # reads the newest checkpoint: before it may be deleted
        if self.settings.externalized_retention == DELETE_ON_CANCELLATION:
            try:
                self.storage.discard_all()
            except (OSError, CheckpointStorageError) as error:
                log.warning("could not delete the checkpoints in %s: %s", self.storage.job_dir,
                            error)  # fmt: skip
        self.publisher.publish(state="CANCELED")
        self._end(_job_error(f"job '{self.graph.job_name}' was cancelled: "
                             f"{self._cancel_requested}", None))  # fmt: skip

    def _crash(self, error: Exception) -> None:
        """The crash path: an unexpected error fails the job and leaves no task running."""
        log.error("job '%s' failed on an unexpected error", self.graph.job_name, exc_info=error)
        if self.attempt is not None:
            with contextlib.suppress(Exception):
                self._stop_attempt()
        if self._restart is not None:
            self._restart.cancel()
        with contextlib.suppress(Exception):
            self._leave_stage("the job failed")
        with contextlib.suppress(Exception):
            self.publisher.publish(state="FAILED")
        job_error = _job_error(f"job '{self.graph.job_name}' failed on an unexpected error: "
                               f"{type(error).__name__}: {error}", error)  # fmt: skip
        job_error.__suppress_context__ = False  # the crash keeps its whole story
        self._end(job_error)

    def _end(self, outcome: list[CheckpointStats] | BaseException) -> None:
        if isinstance(outcome, BaseException):  # a finished job's sinks closed cleanly
            self._clean_up_sinks()
        if self.lease.held:  # no checkpoint of this run completes any more: sweep shared/
            try:
                self.storage.sweep_shared()
            except Exception as error:  # never changes the outcome: the next start sweeps
                log.warning("job '%s': shared checkpoint files not swept: %s: %s",
                            self.graph.job_name, type(error).__name__, error)  # fmt: skip
        self._outcome = outcome
        self.ended = True
        ended = "the job finished" if isinstance(outcome, list) else str(outcome)
        self.publisher.fail_operations(f"{ended} before the savepoint completed")
        with contextlib.suppress(Exception):
            self.close()

    def _clean_up_sinks(self) -> None:
        """The job ended for good without finishing: once its tasks are gone, resolve what its
        sinks left (sink_cleanup.py) as a restore of its newest completed checkpoint would.
        Only while this run holds the folder's lease (a run that lost it touches nothing);
        never raises: a failure is one logged line, the job's outcome stays what it is."""
        if self._sinks_cleaned or self._runner is None or not self.lease.held:
            return
        self._sinks_cleaned = True
        name = self.graph.job_name
        try:
            self._await_tasks_gone()
            self._renew_lease()  # the wait may outlast the expiry: is the folder still ours?
            point = self.restoring.choose()
            result = clean_up_sinks(
                self.graph,
                point,
                self.restoring.abandoned_above,
                lineage=self.lineage,
                deployment_id=f"{self.run_id}-cleanup",
                attempt=self.status.attempt + 1,
                clock=self.clock,
            )
        except Exception as error:
            log.warning("job '%s': could not clean up its sinks: %s: %s; the next run or "
                        "`barrierflow cleanup` resolves what they left", name,
                        type(error).__name__, error)  # fmt: skip
            return
        if result.cleaned:
            log.info("job '%s': cleaned up sink(s) %s as a restore of %s would (committed what "
                     "it covers, rolled back and deleted the rest)", name,
                     ", ".join(result.cleaned), result.restored)  # fmt: skip

    def _await_tasks_gone(self) -> None:
        """Wait (at most TASKS_GONE_TIMEOUT_S) until the last Spark job ended and the stream
        task processes on this host exited: a live task could still prepare or stage."""
        deadline = time.monotonic() + TASKS_GONE_TIMEOUT_S
        assert self._runner is not None
        self._runner.wait_ended(self._group(self._stage), TASKS_GONE_TIMEOUT_S)
        here = {socket.gethostname(), "localhost", "127.0.0.1"}
        pids = [pid for host, pid in self.status.processes.values() if host in here]
        while any(probe_process(pid, None) is ProcessState.ALIVE for pid in pids):
            if time.monotonic() > deadline:
                log.warning("job '%s': task processes still run %.0f s after the job ended; "
                            "cleaning up its sinks anyway", self.graph.job_name,
                            TASKS_GONE_TIMEOUT_S)  # fmt: skip
                return
            time.sleep(0.05)

    # ---- checkpoints of the job (across attempts) --------------------------------------------

    def next_checkpoint_id(self) -> int:
        """Above every id used in this job's folder, its history, this run, and the
        savepoint this run started from (ids never go back: Flink's rule)."""
        return max(
            self.storage.next_checkpoint_id(),
            self._first_checkpoint_id,
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
            self.repeated_failures.progressed()
        if stats.status is CheckpointStatsStatus.COMPLETED and not stats.is_savepoint:
            self.restoring.release_claimed(self.checkpoint_stats)


def _job_error(message: str, cause: BaseException | None) -> JobExecutionError:
    """What `run` raises for a job that did not finish: `cause` chained (None: nothing)."""
    error = JobExecutionError(message)
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error
