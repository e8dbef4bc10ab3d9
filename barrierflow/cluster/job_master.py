"""The JobMaster: lives in the Spark driver, deploys attempts, runs the checkpoint
coordinator, and fails over.

One thread (`run`) owns all state and takes mails from one queue: messages of
tasks (posted by RPC reader threads), the end of the Spark job of an attempt
(posted by the submitting thread), and requests of the JobClient. Messages of
any attempt but the current one are dropped, so zombies cannot touch a newer
attempt.

It feeds a `CheckpointStatsTracker` from the coordinator's actions and the tasks'
acknowledgements and declines, logs one INFO line per finished checkpoint, appends
it to the job's `_checkpoint_history.jsonl`, and publishes an immutable `JobView`
that the REST endpoint (rest.py) serves from its own threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from pyspark import cloudpickle

from barrierflow.api.restart_strategies import RestartStrategyConfiguration
from barrierflow.checkpoint import coordinator as cc
from barrierflow.checkpoint.failure import CheckpointFailureReason
from barrierflow.checkpoint.history import CheckpointHistoryFile
from barrierflow.checkpoint.metadata import (
    build_metadata,
    channel_state_assignment,
    check_compatible,
    restore_assignment,
)
from barrierflow.checkpoint.stats import (
    CheckpointStats,
    CheckpointStatsTracker,
    SubtaskCheckpointStats,
    SubtaskDecline,
    TaskVertexInfo,
)
from barrierflow.checkpoint.storage import FileSystemCheckpointStorage
from barrierflow.cluster import spark_runner
from barrierflow.cluster.rest import JobView, RestServer, VertexView, resolve_rest_port
from barrierflow.cluster.rpc import RpcServer
from barrierflow.cluster.user_code import register_user_modules_by_value
from barrierflow.connectors.base import SourceSplit
from barrierflow.errors import BarrierflowError, CheckpointStorageError, JobExecutionError
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.graph.job_graph import JobGraph, SubtaskId
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.network.connections import close_connection
from barrierflow.runtime.task import TaskSettings

log = logging.getLogger(__name__)

TICK_S = 0.02
"""How often the coordinator is asked whether a checkpoint is due."""
REGISTRATION_TIMEOUT_S = 120.0
VIEW_PUBLISH_INTERVAL_S = 0.1
"""How stale the REST endpoint's checkpoint statistics may be while checkpoints run."""

__all__ = ["CheckpointStats", "JobMaster", "JobSettings", "JobStatus"]
# CheckpointStats (checkpoint/stats.py) is what JobExecutionResult.checkpoints holds.


@dataclass
class JobStatus:
    """Read by the JobClient from other threads; replaced, never mutated in place."""

    state: str = "CREATED"
    attempt: int = 0
    processes: dict[SubtaskId, tuple[str, int]] = field(default_factory=dict)
    completed_checkpoints: tuple[int, ...] = ()
    restored_from: int | None = None
    rest_url: str | None = None
    """The REST endpoint's base URL (`http://host:port`), None while starting or when off."""


@dataclass
class JobSettings:
    checkpoint_interval_ms: int
    coordinator: cc.CheckpointCoordinatorConfig
    """With checkpointing off, an interval so long only the final checkpoint runs."""
    retained_checkpoints: int
    restart_strategy: RestartStrategyConfiguration
    checkpoint_storage: str
    master: str | None
    buffer_size: int = 1000
    buffer_timeout_ms: int = 50
    rest_port: int | str | None = None
    """0: any free port; a number: that port; "off": no endpoint; None: $BARRIERFLOW_REST_PORT."""
    checkpointing_mode: str = "exactly_once"
    """A CheckpointingMode value."""
    unaligned_checkpoints: bool = False
    aligned_checkpoint_timeout_ms: int = 0


class _AttemptFailed(Exception):
    pass


class JobMaster:
    def __init__(self, graph: JobGraph, settings: JobSettings) -> None:
        self.graph = graph
        self.settings = settings
        self.job_id = uuid.uuid4().hex
        self.run_id = uuid.uuid4().hex[:8]
        self.secret = secrets.token_bytes(32)
        self.storage = FileSystemCheckpointStorage(settings.checkpoint_storage, graph.job_name)
        self.partitions = tuple(graph.all_subtasks())
        self.sources = [s for s in graph.source_subtasks()]
        self.mailbox: queue.SimpleQueue = queue.SimpleQueue()
        self.status = JobStatus()
        self.checkpoint_stats: list[CheckpointStats] = []
        """Every completed checkpoint of this run, in order (JobExecutionResult.checkpoints)."""
        self.stats_tracker = CheckpointStatsTracker(
            TaskVertexInfo(v.vertex_id, v.name, v.parallelism) for v in graph.vertices
        )
        self.history = CheckpointHistoryFile(self.storage.job_dir)
        self.view: JobView | None = None
        """Published by the JobMaster thread, read by REST threads; replaced, never mutated."""
        self._view_dirty = False
        self._view_published_at = 0.0
        self._start_ms = _now_ms()
        self._status_changed = threading.Condition()
        self._cancel_requested: str | None = None

    # ---- called from other threads -----------------------------------------------------------

    def request_cancel(self, reason: str = "cancelled by the user") -> None:
        self.mailbox.put(("cancel", reason))

    def wait_for(self, predicate, timeout: float) -> bool:
        with self._status_changed:
            return self._status_changed.wait_for(lambda: predicate(self.status), timeout)

    def _publish(self, **changes: Any) -> None:
        with self._status_changed:
            self.status = JobStatus(**{**self.status.__dict__, **changes})
            self._status_changed.notify_all()
        self._publish_view()

    # ---- checkpoint statistics and the REST view (JobMaster thread) ----------------------------

    def _publish_view(self) -> None:
        status, settings = self.status, self.settings
        self.view = JobView(
            job_id=self.job_id,
            name=self.graph.job_name,
            state=status.state,
            attempt=status.attempt,
            start_ms=self._start_ms,
            published_ms=_now_ms(),
            vertices=tuple(
                VertexView(
                    v.vertex_id,
                    v.name,
                    v.parallelism,
                    tuple((op.uid, op.name) for op in v.operators),
                )
                for v in self.graph.vertices
            ),
            checkpoints=self.stats_tracker.snapshot(),
            checkpoint_config={
                "interval": (
                    settings.checkpoint_interval_ms if settings.checkpoint_interval_ms > 0 else None
                ),
                "timeout": settings.coordinator.timeout_ms,
                "min_pause": settings.coordinator.min_pause_ms,
                "max_concurrent": settings.coordinator.max_concurrent,
                "tolerable_failed_checkpoints": settings.coordinator.tolerable_failures,
                "retained": settings.retained_checkpoints,
                "checkpoint_storage": self.storage.job_dir.uri,
            },
            restored_from=status.restored_from,
        )
        self._view_dirty = False
        self._view_published_at = time.monotonic()

    def _publish_view_if_due(self) -> None:
        """Publish changed statistics at most every VIEW_PUBLISH_INTERVAL_S."""
        if self._view_dirty and (
            time.monotonic() - self._view_published_at >= VIEW_PUBLISH_INTERVAL_S
        ):
            self._publish_view()

    def _checkpoint_ended(self, stats: CheckpointStats) -> None:
        """Log a finished checkpoint and append it to the persisted history."""
        log.info("job '%s': %s", self.graph.job_name, stats.describe())
        try:
            self.history.append(stats, job_id=self.job_id)
        except CheckpointStorageError as error:
            log.warning("checkpoint %d is missing from the history: %s", stats.checkpoint_id, error)
        self._view_dirty = True

    def _start_rest(self, host: str, port: int | None) -> RestServer | None:
        if port is None:
            return None
        try:
            server = RestServer(host, port, lambda: self.view)
        except OSError as error:
            log.warning(
                "job '%s' runs without its REST endpoint: cannot listen on %s:%d: %s",
                self.graph.job_name,
                host,
                port,
                error,
            )
            return None
        log.info(
            "job '%s' (%s): REST endpoint at %s/jobs/%s",
            self.graph.job_name,
            self.job_id,
            server.url,
            self.job_id,
        )
        return server

    # ---- the JobMaster thread ------------------------------------------------------------------

    def run(self) -> list[CheckpointStats]:
        graph = self.graph
        rest_port = resolve_rest_port(self.settings.rest_port, os.environ)
        splits = self._create_splits()
        for vertex in graph.vertices:
            for op in vertex.operators:
                if op.transformation.sink is not None:
                    op.transformation.sink.prepare()
        self.storage.prepare()
        self._first_checkpoint_id = self._checkpoint_id_after_history()
        payload_graph = _pickle_graph(graph)
        spark = spark_runner.obtain_spark(self.settings.master, len(self.partitions))
        spark_runner.check_slots(spark, len(self.partitions))
        host = (
            "127.0.0.1"
            if spark_runner.is_local_master(spark.sparkContext.master)
            else (spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1"))
        )
        self._bind_host = host
        server = RpcServer(host, self.secret, self.mailbox.put)
        self._publish_view()
        rest = self._start_rest(host, rest_port)
        if rest is not None:
            self._publish(rest_url=rest.url)
        tracker = self.settings.restart_strategy.new_tracker()
        attempt = 0
        try:
            while True:
                try:
                    self._run_attempt(spark, server, payload_graph, splits, attempt)
                    self._publish(state="FINISHED")
                    return self.checkpoint_stats
                except _AttemptFailed as failure:
                    cause = str(failure)
                    if self._cancel_requested is not None:
                        self._publish(state="CANCELED")
                        raise JobExecutionError(
                            f"job '{graph.job_name}' was cancelled: {self._cancel_requested}"
                        ) from None
                    decision = tracker.decide(int(time.time() * 1000))
                    if not decision.restart:
                        self._publish(state="FAILED")
                        raise JobExecutionError(
                            f"job '{graph.job_name}' failed and will not restart "
                            f"({decision.explanation}). Cause: {cause}"
                        ) from None
                    log.warning(
                        "job '%s' attempt %d failed: %s; %s, in %d ms",
                        graph.job_name,
                        attempt,
                        cause.splitlines()[0],
                        decision.explanation,
                        decision.delay_ms,
                    )
                    self._publish(state="RESTARTING")
                    time.sleep(decision.delay_ms / 1000)
                    attempt += 1
        finally:
            server.close()
            if rest is not None:
                rest.close()
                self._publish(rest_url=None)

    def _checkpoint_id_after_history(self) -> int:
        """Above every id in the persisted history: ids never repeat in a job's folder, even
        where a failed checkpoint's folder was deleted."""
        try:
            records = self.history.read_records()
        except CheckpointStorageError as error:
            log.warning("%s", error)
            return 1
        return max((int(r["id"]) for r in records), default=0) + 1

    def _create_splits(self) -> dict[SubtaskId, list[SourceSplit]]:
        assigned: dict[SubtaskId, list[SourceSplit]] = {}
        for vertex in self.graph.vertices:
            if not vertex.is_source:
                continue
            source = vertex.operators[0].transformation.source
            splits = source.create_splits()
            for subtask in vertex.subtasks():
                assigned[subtask] = splits[subtask.subtask_index :: vertex.parallelism]
        return assigned

    def _run_attempt(self, spark, server, payload_graph, splits, attempt: int) -> None:
        latest = self.storage.latest_completed()
        if latest is not None:
            check_compatible(
                self.graph, latest[1], f"checkpoint {self.storage.checkpoint_dir(latest[0])}"
            )
            self.stats_tracker.report_restored(
                latest[0],
                _now_ms(),
                external_path=self.storage.checkpoint_dir(latest[0]).uri,
                is_savepoint=bool(latest[1].get("is_savepoint", False)),
            )
        settings = TaskSettings(
            job_id=self.job_id,
            attempt=attempt,
            deployment_id=f"{self.run_id}-{attempt}",
            secret=self.secret,
            jobmaster_address=server.address,
            bind_host=self._bind_host,
            checkpoint_dir=self.storage.job_dir.uri,
            partitions=self.partitions,
            buffer_size=self.settings.buffer_size,
            buffer_timeout_ms=self.settings.buffer_timeout_ms,
            checkpointing_mode=self.settings.checkpointing_mode,
            unaligned_checkpoints=self.settings.unaligned_checkpoints,
            aligned_checkpoint_timeout_ms=self.settings.aligned_checkpoint_timeout_ms,
        )
        payload = cloudpickle.dumps((build_task_descriptors(payload_graph), settings))
        group = f"barrierflow-{self.job_id}-{attempt}"
        self._publish(
            state="DEPLOYING",
            attempt=attempt,
            processes={},
            restored_from=latest[0] if latest else None,
        )
        thread = threading.Thread(
            target=self._submit,
            args=(spark, payload, group, attempt),
            daemon=True,
            name=f"spark-attempt-{attempt}",
        )
        attempt_run = _Attempt(self, attempt, settings, splits, latest)
        thread.start()
        try:
            attempt_run.run()
        except _AttemptFailed:
            attempt_run.cancel_tasks()
            spark_runner.cancel_attempt(spark, group)
            thread.join(30)
            raise
        thread.join(60)

    def _submit(self, spark, payload: bytes, group: str, attempt: int) -> None:
        try:
            spark_runner.run_attempt(
                spark, payload, len(self.partitions), group, self.graph.job_name
            )
            self.mailbox.put(("spark_done", attempt, None))
        except BaseException as error:
            self.mailbox.put(("spark_done", attempt, spark_runner.spark_error_summary(error)))


class _Attempt:
    """One deployment: registration, deployment, checkpoints, end. Raises _AttemptFailed."""

    def __init__(self, master: JobMaster, attempt: int, settings: TaskSettings, splits, latest):
        self.master = master
        self.graph = master.graph
        self.attempt = attempt
        self.settings = settings
        self.splits = splits
        self.latest = latest
        self.connections: dict[int, Connection] = {}
        self.partition_of: dict[Connection, int] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.running: set[int] = set()
        self.finished: set[int] = set()
        self.end_of_input: set[int] = set()
        self.coordinator: cc.CheckpointCoordinator | None = None
        self.stats = master.stats_tracker
        self.source_partitions = {master.partitions.index(s) for s in master.sources}

    def run(self) -> None:
        master = self.master
        deadline = time.monotonic() + REGISTRATION_TIMEOUT_S
        while True:
            try:
                mail = master.mailbox.get(timeout=TICK_S)
            except queue.Empty:
                mail = None
            if mail is not None and self._handle(mail):
                return
            if self.coordinator is not None:
                self._act(self.coordinator.on_tick(_now_ms()))
                master._publish_view_if_due()
            elif len(self.running) < len(master.partitions) and time.monotonic() > deadline:
                self._fail(
                    f"only {len(self.addresses)} of {len(master.partitions)} tasks registered "
                    f"within {REGISTRATION_TIMEOUT_S:.0f} s"
                )

    # ---- mails ---------------------------------------------------------------------------------

    def _handle(self, mail: tuple[Any, ...]) -> bool:
        """True when the attempt has finished successfully."""
        kind = mail[0]
        if kind == "task_message":
            return self._on_task_message(mail[1], mail[2])
        if kind == "task_lost":
            partition = self.partition_of.get(mail[1])
            if partition is not None and partition not in self.finished:
                subtask = self.master.partitions[partition]
                host, pid = self.master.status.processes.get(subtask, ("?", "?"))
                self._fail(
                    f"task {self._name(partition)} (pid {pid} on {host}) lost its connection to "
                    "the JobMaster: its process died or was killed"
                )
            return False
        if kind == "spark_done":
            _, attempt, error = mail
            if attempt != self.attempt:
                return False
            if error is not None:
                self._fail(f"the Spark job of attempt {attempt} failed: {error}")
            if len(self.finished) < len(self.master.partitions):
                self._fail("the Spark job ended before every task finished")
            return True
        if kind == "cancel":
            self.master._cancel_requested = mail[1]
            self._fail(mail[1])
        return False

    def _on_task_message(self, conn: Connection, message: Any) -> bool:
        if getattr(message, "attempt", None) != self.attempt:
            if isinstance(message, msg.RegisterTask):
                conn.close()  # a zombie of an earlier attempt
            return False
        partition = message.partition
        if isinstance(message, msg.RegisterTask):
            self._register(conn, message)
        elif self.partition_of.get(conn) != partition:
            return False  # not from the connection that registered this partition
        elif isinstance(message, msg.TaskRunning):
            self.running.add(partition)
            if len(self.running) == len(self.master.partitions):
                self._start_checkpointing()
        elif isinstance(message, msg.AcknowledgeCheckpoint):
            if self.coordinator is not None:
                now = _now_ms()
                result, actions = self.coordinator.receive_acknowledge(
                    message.checkpoint_id, partition, message.state_handle, now
                )
                if result is cc.AcknowledgeResult.SUCCESS:
                    self._report_acknowledged(message, now)
                self._act(actions)
        elif isinstance(message, msg.DeclineCheckpoint):
            if self.coordinator is not None:
                now = _now_ms()
                reason = CheckpointFailureReason[message.reason]
                subtask = self.master.partitions[partition]
                self.stats.report_declined(
                    message.checkpoint_id,
                    SubtaskDecline(
                        subtask.vertex_id, subtask.subtask_index, now, reason, message.message
                    ),
                )
                self._act(
                    self.coordinator.receive_decline(message.checkpoint_id, partition, reason, now)
                )
        elif isinstance(message, msg.EndOfInput):
            self.end_of_input.add(partition)
            if self.end_of_input >= self.source_partitions and self.coordinator is not None:
                self._act(self.coordinator.request_final_checkpoint(_now_ms()))
        elif isinstance(message, msg.TaskFinished):
            self.finished.add(partition)
        elif isinstance(message, msg.TaskFailed):
            failure = message.failure
            self._fail(
                f"task {self._name(partition)} failed in {failure.where}: {failure.headline}\n"
                f"{failure.traceback}"
            )
        return False

    def _report_acknowledged(self, ack: msg.AcknowledgeCheckpoint, now: int) -> None:
        subtask = self.master.partitions[ack.partition]
        self.stats.report_acknowledged(
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
        self.master._view_dirty = True

    def _register(self, conn: Connection, message: msg.RegisterTask) -> None:
        partition = message.partition
        if partition in self.addresses:
            conn.close()
            return
        self.connections[partition] = conn
        self.partition_of[conn] = partition
        self.addresses[partition] = message.data_address
        processes = dict(self.master.status.processes)
        processes[self.master.partitions[partition]] = (message.host, message.pid)
        self.master._publish(processes=processes)
        if len(self.addresses) == len(self.master.partitions):
            self._deploy()

    def _deploy(self) -> None:
        master, graph = self.master, self.graph
        latest = self.latest
        for partition, conn in self.connections.items():
            subtask = master.partitions[partition]
            restore = {}
            channel_state = None
            if latest is not None:
                checkpoint_dir = master.storage.checkpoint_dir(latest[0])
                restore = restore_assignment(graph, latest[1], checkpoint_dir, subtask)
                channel_state = channel_state_assignment(graph, latest[1], checkpoint_dir, subtask)
            conn.send(
                msg.DeployTask(
                    attempt=self.attempt,
                    peers=self.addresses,
                    splits=self.splits.get(subtask, []),
                    restore_checkpoint_id=latest[0] if latest else None,
                    restore=restore,
                    channel_state=channel_state,
                )
            )

    def _start_checkpointing(self) -> None:
        master = self.master
        config = master.settings.coordinator
        self.coordinator = cc.CheckpointCoordinator(
            config,
            tasks_to_trigger=frozenset(self.source_partitions),
            tasks_to_ack=frozenset(range(len(master.partitions))),
            next_checkpoint_id=max(
                master.storage.next_checkpoint_id(),
                master._first_checkpoint_id,
                (master.stats_tracker.highest_triggered_id or 0) + 1,
            ),
        )
        self.coordinator.start(_now_ms())
        master._publish(state="RUNNING")
        if self.end_of_input >= self.source_partitions:
            self._act(self.coordinator.request_final_checkpoint(_now_ms()))

    # ---- coordinator actions -------------------------------------------------------------------

    def _act(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, cc.TriggerCheckpoint):
                self.stats.report_triggered(
                    action.checkpoint_id,
                    action.timestamp_ms,
                    is_savepoint=action.is_savepoint,
                    is_final=action.is_final,
                )
                self.master._view_dirty = True
                trigger = msg.TriggerCheckpoint(
                    self.attempt,
                    action.checkpoint_id,
                    action.timestamp_ms,
                    action.is_final,
                    is_savepoint=action.is_savepoint,
                )
                for partition in self.source_partitions:
                    self._send(partition, trigger)
            elif isinstance(action, cc.FinalizeCheckpoint):
                self._finalize(action)
            elif isinstance(action, cc.NotifyCheckpointComplete):
                self._on_completed(action)
            elif isinstance(action, cc.NotifyCheckpointAborted):
                self._report_failed(action)
                for partition in self.connections:
                    self._send(
                        partition, msg.NotifyCheckpointAborted(self.attempt, action.checkpoint_id)
                    )
            elif isinstance(action, cc.DiscardState):
                self.master.storage.discard(action.checkpoint_id)
            elif isinstance(action, cc.FailJob):
                self._fail(action.reason)

    def _finalize(self, action: Any) -> None:
        master = self.master
        handles = {master.partitions[p]: h for p, h in action.task_states.items()}
        metadata = build_metadata(
            self.graph, action.checkpoint_id, action.timestamp_ms, action.is_final, handles
        )
        try:
            master.storage.write_metadata(action.checkpoint_id, metadata)
        except CheckpointStorageError:
            log.warning("finalizing checkpoint %d failed", action.checkpoint_id, exc_info=True)
            self._act(self.coordinator.on_finalize_failed(action.checkpoint_id, _now_ms()))
            return
        self._act(self.coordinator.on_checkpoint_finalized(action.checkpoint_id, _now_ms()))

    def _report_failed(self, action: cc.NotifyCheckpointAborted) -> None:
        stats = self.stats.report_failed(action.checkpoint_id, _now_ms(), action.reason)
        self.master._checkpoint_ended(stats)

    def _on_completed(self, action: Any) -> None:
        master = self.master
        stats = self.stats.report_completed(
            action.checkpoint_id,
            _now_ms(),
            external_path=master.storage.checkpoint_dir(action.checkpoint_id).uri,
        )
        master.checkpoint_stats.append(stats)
        for partition in self.connections:
            self._send(
                partition,
                msg.NotifyCheckpointComplete(self.attempt, action.checkpoint_id, action.is_final),
            )
        master._checkpoint_ended(stats)
        master.storage.retain(master.settings.retained_checkpoints)
        master._publish(
            completed_checkpoints=(*master.status.completed_checkpoints, action.checkpoint_id)
        )
        if action.is_final:
            master._publish(state="FINISHING")

    # ---- failure ---------------------------------------------------------------------------

    def _send(self, partition: int, message: Any) -> None:
        try:
            self.connections[partition].send(message)
        except OSError:
            if partition not in self.finished:
                self._fail(f"task {self._name(partition)} is unreachable")

    def _fail(self, cause: str) -> None:
        if self.coordinator is not None:
            # Only the files go: the tasks are being cancelled, so nobody is told.
            for action in self.coordinator.abort_pending_on_failover(_now_ms()):
                if isinstance(action, cc.NotifyCheckpointAborted):
                    # A checkpoint whose trigger action was never carried out (the failure
                    # came first, in the same batch of actions) never reached the tracker.
                    if action.checkpoint_id in self.stats.in_progress_ids:
                        self._report_failed(action)
                elif isinstance(action, cc.DiscardState):
                    with contextlib.suppress(OSError):
                        self.master.storage.discard(action.checkpoint_id)
        raise _AttemptFailed(cause)

    def cancel_tasks(self) -> None:
        for conn in self.connections.values():
            with contextlib.suppress(OSError):
                conn.send(msg.CancelTask(self.attempt, "the job is failing over or cancelled"))
            close_connection(conn)

    def _name(self, partition: int) -> str:
        subtask = self.master.partitions[partition]
        vertex = self.graph.vertex(subtask.vertex_id)
        return f"'{vertex.name}' ({subtask.subtask_index + 1}/{vertex.parallelism})"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _pickle_graph(graph: JobGraph) -> JobGraph:
    """Fail on the driver, with the operator's name, if user code cannot be shipped."""
    register_user_modules_by_value()
    for vertex in graph.vertices:
        for op in vertex.operators:
            try:
                cloudpickle.dumps(op.transformation)
            except Exception as error:
                raise BarrierflowError(
                    f"operator '{op.name}' (uid {op.uid}) cannot be sent to the tasks: {error}"
                ) from error
    return graph
