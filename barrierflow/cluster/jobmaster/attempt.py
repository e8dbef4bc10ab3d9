"""One attempt of a job: its tasks register, are deployed, report, and end.

An attempt starts when the JobMaster submits its Spark job and ends when that job
ends (success), or when something fails it: a task's failure, a task's process
dying, the deployment timeouts, the coordinator giving up, a cancel request. Any
of those raises `AttemptFailed` with the attempt's root cause; the JobMaster then
decides whether to restart. JobMaster thread only; time is read from and waited
for through the JobMaster's clock and scheduler.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from barrierflow._scheduler import ScheduledAction
from barrierflow.checkpoint import coordinator as cc
from barrierflow.checkpoint.metadata import channel_state_assignment, restore_assignment
from barrierflow.cluster.jobmaster.attempt_failure import (
    AttemptFailed,
    AttemptFailure,
    task_failure,
)
from barrierflow.cluster.jobmaster.checkpoint_actions import CheckpointActions, SavepointRequest
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.cluster.mails import TaskConnection
from barrierflow.cluster.spark.runner import spark_job_error
from barrierflow.connectors.base import SourceSplit
from barrierflow.errors import ExecutorImportError, JobMasterUnreachableError
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime import task_messages as msg

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.hosts import AttemptHost
    from barrierflow.cluster.jobmaster.restore_point import RestorePoint

log = logging.getLogger(__name__)

TICK_MS = 20
"""How often the coordinator is asked whether a checkpoint is due."""
REGISTRATION_TIMEOUT_MS = 300_000
"""How long the tasks of an attempt may go without progress (one more task registered or
running) once Spark started them, before the attempt fails. It bounds a hang, not the
deployment (a task's failure, or its Spark task's, ends the attempt at once): on a busy host
a Spark task's fresh Python worker takes long to start, as it imports barrierflow and the
job's code (8 of them took 110 s from Spark's start to their registration at load 35 on 2
cores, against about 1 s for reused workers)."""
SLOT_WAIT_TIMEOUT_MS = 600_000
"""How long an attempt's barrier stage may wait for free task slots (other Spark jobs of the
session hold them) before the attempt fails; the master offers enough of them in all, or
the job was refused before it started (`check_slots`)."""
SLOT_WAIT_REPORT_MS = 30_000
"""How often an attempt still waiting for free task slots says so in the log."""
LOST_PEER_GRACE_MS = 1_500
"""How long a lost-peer failure waits for its primary cause (the peer's own failure or
its lost connection) before it is reported as the attempt's cause itself."""
SPARK_END_GRACE_MS = 5_000
"""How long an attempt whose Spark job ended cleanly waits for the tasks' last messages:
a task says it finished, then ends its Spark task, and the JobMaster may hear of the Spark
job's end before the RPC reader has handed over that last message."""


class Attempt:
    """One deployment: registration, deployment, task messages, checkpoints, end.

    Guarantees every handler either returns or raises `AttemptFailed` naming the root
    cause: a lost peer (a secondary failure) is reported only if no primary cause
    arrives within LOST_PEER_GRACE_MS. Assumes the JobMaster passes only messages of
    this attempt's number (it refuses older ones) and calls `stop` once it failed.
    """

    def __init__(
        self,
        master: AttemptHost,
        number: int,
        splits: dict[SubtaskId, list[SourceSplit]],
        latest: RestorePoint | None,
        connections: dict[int, TaskConnection] | None = None,
        awaiting_launch: bool = False,
    ) -> None:
        """`connections`: the tasks' kept connections when the attempt runs in place (they
        register again on them), so a process lost before it registers fails the attempt.
        `awaiting_launch`: a new Spark stage whose runner reports when Spark started its
        tasks (`on_spark_tasks_launched`); until then the stage waits for free slots."""
        self.master = master
        self.number = number
        self.splits = splits
        self.latest = latest
        self.partitions = master.partitions
        self.connections: dict[int, TaskConnection] = dict(connections or {})
        self.connections_kept = connections is not None
        """The attempt runs in place, in the previous attempt's Spark stage."""
        self.partition_of = {conn: p for p, conn in self.connections.items()}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.running: set[int] = set()
        self.finished: set[int] = set()
        self.failed: set[int] = set()
        self.end_of_input: set[int] = set()
        self.lost: set[int] = set()
        """Tasks whose connection ended: their process is gone (or finished)."""
        self._spark_end_timer: ScheduledAction | None = None
        self.spark_job_ended = False
        self.source_partitions = frozenset(self.partitions.index(s) for s in master.sources)
        self.checkpoints: CheckpointActions | None = None
        self._secondary: AttemptFailure | None = None
        self._tick_timer: ScheduledAction | None = None
        self._timers: list[ScheduledAction] = []
        self.launched = not awaiting_launch
        """Whether Spark started the tasks (a registration proves it too)."""
        self._submitted_s = master.clock.monotonic()
        self._launched_after_s: float | None = None
        """When Spark reported the start of the tasks, in seconds after the submission."""
        self._deadline: ScheduledAction | None = None
        """The deployment's current bound: the slot wait, else the registration's."""
        if self.launched:
            self._expect_progress()
        else:
            self._deadline = master.scheduler.schedule(
                SLOT_WAIT_TIMEOUT_MS, self._slots_timed_out, f"slot wait of attempt {number}"
            )
            self._report_slot_wait()
        self._handlers: dict[type, Callable[[int, Any], None]] = {
            msg.TaskRunning: self._on_running,
            msg.AcknowledgeCheckpoint: self._on_acknowledge,
            msg.DeclineCheckpoint: self._on_decline,
            msg.EndOfInput: self._on_end_of_input,
            msg.TaskFinished: self._on_finished,
            msg.TaskFailed: self._on_failed,
            msg.TaskProcessDied: self._on_process_died,
            msg.SparkTaskProcess: self._on_spark_task_process,
            msg.TaskMetricsReport: self._on_metrics,
        }

    # ---- mails (the JobMaster dispatches them here) -------------------------------------------

    def on_task_message(self, conn: TaskConnection, message: Any) -> None:
        if isinstance(message, msg.RegisterTask):
            self._register(conn, message)
        elif isinstance(message, msg.TaskProcessDied) and message.partition not in self.connections:
            # died before it registered in this attempt: keep its Spark task's connection, so
            # stopping the attempt cancels that Spark task too
            self.connections[message.partition] = conn
            self.partition_of[conn] = message.partition
            self._on_process_died(message.partition, message)
        elif self.partition_of.get(conn) != message.partition:
            log.warning("refused %s: not from the connection that registered it", message)
        else:
            self._handlers[type(message)](message.partition, message)

    def on_connection_lost(self, conn: TaskConnection) -> None:
        partition = self.partition_of.get(conn)
        if partition is not None:
            self.lost.add(partition)
        if partition is None or partition in self.finished or partition in self.failed:
            return  # not ours, or the task already said how it ended
        host, pid = self._process_of(partition)
        self._fail(
            AttemptFailure(
                f"task {self.task_name(partition)} (pid {pid} on {host}) died: "
                "its process was killed or exited"
            )
        )

    def on_spark_job_ended(self, error: str | None) -> None:
        """The attempt's Spark job ended: it failed, or the attempt finishes once every task
        said so (at once, or when a last TaskFinished arrives within SPARK_END_GRACE_MS)."""
        self.spark_job_ended = True
        if error is not None:
            cause = spark_job_error(error)
            # No restart helps when an executor lacks the job's code, or when no task of
            # this attempt could reach the JobMaster: the next attempt would fail the same way.
            if isinstance(cause, ExecutorImportError) or (
                isinstance(cause, JobMasterUnreachableError) and not self.addresses
            ):
                self._fail(AttemptFailure(str(cause), cause, fatal=True))
            cause.add_note(f"Spark's report:\n{error}")
            self._fail(
                AttemptFailure(f"the Spark job of attempt {self.number} failed: {cause}", cause)
            )
        if not self._finish_if_done():
            self._spark_end_timer = self.master.scheduler.schedule(
                SPARK_END_GRACE_MS, self._spark_ended_early, "last task messages"
            )
            self._timers.append(self._spark_end_timer)

    def _finish_if_done(self) -> bool:
        """Tell the JobMaster the attempt finished once its Spark job ended and every task
        said it finished (in either order)."""
        if not self.spark_job_ended or len(self.finished) < len(self.partitions):
            return False
        if self._spark_end_timer is not None:
            self._spark_end_timer.cancel()
        self.master.attempt_finished(self)
        return True

    def _spark_ended_early(self) -> None:
        self._fail(AttemptFailure("the Spark job ended before every task finished"))

    def cancel(self, reason: str) -> None:
        raise AttemptFailed(AttemptFailure(reason))

    def inject_failure(self, subtask: SubtaskId, reason: str) -> None:
        """Tell a task to fail as user code would (`barrierflow chaos`); a task that has not
        registered yet or has already ended is not told."""
        partition = self.partitions.index(subtask)
        if partition in self.connections and partition not in self.finished | self.failed:
            self.send(partition, msg.InjectFailure(self.number, reason))

    def live_tasks(self) -> dict[int, TaskConnection] | None:
        """Every task's connection if all tasks registered and their processes and Spark job
        are alive and none finished (the job can roll back in place), else None."""
        if self.spark_job_ended or self.lost or self.finished:
            return None
        if len(self.addresses) < len(self.partitions):
            return None
        return dict(self.connections)

    def halt(self) -> None:
        """End this attempt on the JobMaster's side: no more timers, pending checkpoints
        aborted. The tasks are left to the caller (`stop`, or a roll-back in place)."""
        for timer in self._timers:
            timer.cancel()
        if self._deadline is not None:
            self._deadline.cancel()
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        if self.checkpoints is not None:
            self.checkpoints.abort_on_failover()

    def stop(self) -> None:
        """End this attempt after a failure: `halt`, then every task told to cancel and its
        connection closed."""
        try:
            self.halt()
        finally:  # the tasks go even if aborting the checkpoints failed (the crash path)
            cancel_tasks(self.connections, self.number, "the job is failing over or cancelled")

    # ---- waiting for slots, registration and deployment --------------------------------------

    def on_spark_tasks_launched(self) -> None:
        """Spark started the stage's tasks: the slot wait ends, the registration's bound
        starts (a repeated or late report changes nothing)."""
        if self.launched:
            return
        self.launched = True
        waited_s = self.master.clock.monotonic() - self._submitted_s
        self._launched_after_s = waited_s
        if waited_s * 1000 >= SLOT_WAIT_REPORT_MS:
            log.info(
                "attempt %d: Spark started its %d tasks %.0f s after their submission",
                self.number,
                len(self.partitions),
                waited_s,
            )
        self._expect_progress()

    def _expect_progress(self) -> None:
        """(Re)start the registration's bound: the tasks made progress, or just started."""
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.master.scheduler.schedule(
            REGISTRATION_TIMEOUT_MS,
            self._registration_timed_out,
            f"registration timeout of attempt {self.number}",
        )

    def _report_slot_wait(self) -> None:
        """Log, every SLOT_WAIT_REPORT_MS while the stage waits for free slots, that it does."""
        if self.launched:
            return
        waited_s = self.master.clock.monotonic() - self._submitted_s
        if waited_s * 1000 >= SLOT_WAIT_REPORT_MS / 2:
            log.info(
                "attempt %d: Spark has not started its %d tasks after %.0f s (a barrier stage "
                "starts them all at once, when that many task slots are free)",
                self.number,
                len(self.partitions),
                waited_s,
            )
        self._timers.append(
            self.master.scheduler.schedule(
                SLOT_WAIT_REPORT_MS, self._report_slot_wait, f"attempt {self.number}: slot wait"
            )
        )

    def _slots_timed_out(self) -> None:
        self._fail(
            AttemptFailure(
                f"the Spark stage of attempt {self.number} waited "
                f"{SLOT_WAIT_TIMEOUT_MS / 1000:.0f} s for {len(self.partitions)} free task "
                "slots at once (a barrier stage starts all its tasks together) and never got "
                "them: other Spark jobs of the session hold them, or the host is too busy"
            )
        )

    def _register(self, conn: TaskConnection, message: msg.RegisterTask) -> None:
        partition = message.partition
        if partition in self.addresses:
            log.warning("refused a second registration of task %s", self.task_name(partition))
            conn.close()
            return
        self.launched = True  # a registered task runs, whatever Spark's report says
        self._expect_progress()
        self.connections[partition] = conn
        self.partition_of[conn] = partition
        self.addresses[partition] = message.data_address
        publisher = self.master.publisher
        processes = dict(publisher.status.processes)
        processes[self.partitions[partition]] = (message.host, message.pid)
        publisher.publish(processes=processes)
        if len(self.addresses) == len(self.partitions):
            if not self.connections_kept:
                log.info(
                    "attempt %d: every task registered %.1f s after the submission (Spark "
                    "reported their start after %s)",
                    self.number,
                    self.master.clock.monotonic() - self._submitted_s,
                    "?" if self._launched_after_s is None else f"{self._launched_after_s:.1f} s",
                )
            self._deploy()

    def _deploy(self) -> None:
        master, latest = self.master, self.latest
        for partition in sorted(self.connections):
            subtask = self.partitions[partition]
            restore = {}
            channel_state = None
            if latest is not None:
                folder, metadata = latest.folder, latest.metadata
                restore = restore_assignment(master.graph, metadata, folder, subtask)
                channel_state = channel_state_assignment(master.graph, metadata, folder, subtask)
            fail_restore, read_faults = master.chaos.at_deploy(subtask)
            self.send(
                partition,
                msg.DeployTask(
                    attempt=self.number,
                    peers=self.addresses,
                    splits=self.splits.get(subtask, []),
                    restore_checkpoint_id=latest.checkpoint_id if latest else None,
                    restore=restore,
                    channel_state=channel_state,
                    abandoned_above=master.restoring.abandoned_above,
                    fail_restore=fail_restore,
                    read_faults=read_faults,
                ),
            )

    def _registration_timed_out(self) -> None:
        since_s = self.master.clock.monotonic() - self._submitted_s
        self._fail(
            AttemptFailure(
                f"only {len(self.running)} of {len(self.partitions)} tasks registered and "
                f"started ({len(self.addresses)} registered), none more in the last "
                f"{REGISTRATION_TIMEOUT_MS / 1000:.0f} s ({since_s:.0f} s after the attempt's "
                "Spark stage was submitted)"
            )
        )

    # ---- task messages -----------------------------------------------------------------------

    def _on_running(self, partition: int, message: msg.TaskRunning) -> None:
        self.running.add(partition)
        if self.checkpoints is None:
            if len(self.running) == len(self.partitions):
                self._start_checkpointing()
            else:
                self._expect_progress()

    def _on_acknowledge(self, partition: int, message: msg.AcknowledgeCheckpoint) -> None:
        if self.checkpoints is not None:
            self.checkpoints.acknowledged(message)

    def _on_decline(self, partition: int, message: msg.DeclineCheckpoint) -> None:
        if self.checkpoints is not None:
            self.checkpoints.declined(message)

    def _on_end_of_input(self, partition: int, message: msg.EndOfInput) -> None:
        self.end_of_input.add(partition)
        if self.end_of_input >= self.source_partitions and self.checkpoints is not None:
            self._request_final_checkpoint()

    def _on_finished(self, partition: int, message: msg.TaskFinished) -> None:
        self.finished.add(partition)
        self._finish_if_done()

    def _on_failed(self, partition: int, message: msg.TaskFailed) -> None:
        self.failed.add(partition)
        failure = task_failure(message.failure, self.task_name(partition))
        if not failure.secondary:
            self._fail(failure)
        if self._secondary is None:
            # A lost channel is a consequence: give the primary cause a moment to arrive.
            self._secondary = failure
            self._timers.append(
                self.master.scheduler.schedule(
                    LOST_PEER_GRACE_MS,
                    lambda: self._fail(failure),
                    f"attempt {self.number}: no primary cause after a lost peer",
                )
            )

    def _on_process_died(self, partition: int, message: msg.TaskProcessDied) -> None:
        """The stream task's process died while its Spark task lives: a primary failure that
        keeps the Spark task, so the job can roll back in place (its Spark task respawns it)."""
        if partition in self.finished:
            return
        self.failed.add(partition)
        host = self._process_of(partition)[0]
        self._fail(
            AttemptFailure(
                f"task {self.task_name(partition)} (pid {message.pid} on {host}) died: its "
                f"process {message.how} (its Spark task lives)",
                task=self.task_name(partition),
            )
        )

    def _on_spark_task_process(self, partition: int, message: msg.SparkTaskProcess) -> None:
        subtask = self.partitions[partition]
        self.master.spark_tasks = {**self.master.spark_tasks, subtask: (message.host, message.pid)}

    def _on_metrics(self, partition: int, message: msg.TaskMetricsReport) -> None:
        self.master.metrics.report(self.partitions[partition], message)

    # ---- checkpoints -------------------------------------------------------------------------

    def _start_checkpointing(self) -> None:
        master = self.master
        if self._deadline is not None:
            self._deadline.cancel()  # every task registered and runs
        coordinator = cc.CheckpointCoordinator(
            master.settings.coordinator,
            tasks_to_trigger=self.source_partitions,
            tasks_to_ack=frozenset(range(len(self.partitions))),
            next_checkpoint_id=master.next_checkpoint_id(),
        )
        self.checkpoints = CheckpointActions(master, self, coordinator)
        self.checkpoints.carry_out(coordinator.start(master.clock.epoch_millis()))
        master.publisher.publish(state=JobStatus.RUNNING)
        if self.end_of_input >= self.source_partitions:
            self._request_final_checkpoint()
        self._schedule_tick()

    def _request_final_checkpoint(self) -> None:
        """Every source ended: the final checkpoint (a savepoint if the job is stopping)."""
        assert self.checkpoints is not None
        coordinator, stopping = self.checkpoints.coordinator, self.checkpoints.stop is not None
        self.checkpoints.carry_out(
            coordinator.request_final_checkpoint(
                self.master.clock.epoch_millis(), savepoint=stopping
            )
        )

    def stop_sources(self, request: SavepointRequest) -> None:
        """Stop with savepoint: every source still reading stops (`msg.StopSources`); the
        final checkpoint that follows their EndOfInput is `request`'s savepoint."""
        assert self.checkpoints is not None
        self.checkpoints.stop = request
        for partition in sorted(self.source_partitions - self.end_of_input):
            self.send(partition, msg.StopSources(self.number, request.drain))

    def _schedule_tick(self) -> None:
        self._tick_timer = self.master.scheduler.schedule(TICK_MS, self._tick, "coordinator tick")

    def _tick(self) -> None:
        master = self.master
        self._schedule_tick()
        assert self.checkpoints is not None
        self.checkpoints.carry_out(
            self.checkpoints.coordinator.on_tick(master.clock.epoch_millis())
        )
        master.publisher.publish_view_if_due()
        master.metrics.publish_if_due()

    # ---- sending and failing -----------------------------------------------------------------

    def send(self, partition: int, message: Any) -> None:
        try:
            self.connections[partition].send(message)
        except OSError:
            if partition not in self.finished:
                self._fail(AttemptFailure(f"task {self.task_name(partition)} is unreachable"))

    def send_to_all(self, message: Any) -> None:
        for partition in sorted(self.connections):
            self.send(partition, message)

    def _fail(self, failure: AttemptFailure) -> None:
        raise AttemptFailed(failure)

    def _process_of(self, partition: int) -> tuple[Any, Any]:
        """(host, pid) of the task's stream-task process as it registered, else ("?", "?")."""
        return self.master.publisher.status.processes.get(self.partitions[partition], ("?", "?"))

    def task_name(self, partition: int) -> str:
        """`'words -> Map' (2/2)`: the vertex name and the subtask's 1-based index."""
        subtask = self.partitions[partition]
        vertex = self.master.graph.vertex(subtask.vertex_id)
        return f"'{vertex.name}' ({subtask.subtask_index + 1}/{vertex.parallelism})"


def cancel_tasks(connections: dict[int, TaskConnection], attempt: int, reason: str) -> None:
    """Tell every task to cancel `attempt` and close its connection (an unreachable task is
    already gone)."""
    for conn in connections.values():
        with contextlib.suppress(OSError):
            conn.send(msg.CancelTask(attempt, reason))
        with contextlib.suppress(OSError):
            conn.close()
