"""JobClient: a running job as its driver sees it (wait, watch, savepoints, cancel, and for
tests and demos kill a task), with PyFlink's JobClient methods returning futures."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from barrierflow.cluster.executor.local_processes import (
    check_this_host,
    executor_jvm_of,
    kill_local,
)
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.core.job_id import JobID
from barrierflow.errors import ConfigurationError
from barrierflow.graph.job_graph import JobGraph, SubtaskId

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.views import JobView
    from barrierflow.cluster.metrics.view import MetricsSnapshot


@dataclass(frozen=True)
class JobExecutionResult:
    """What a finished job returns (PyFlink's JobExecutionResult, plus its checkpoints)."""

    job_name: str
    net_runtime_ms: int
    checkpoints: list[Any]
    """CheckpointStats of every completed checkpoint, in order."""
    restarts: int
    job_id: str = ""

    def get_net_runtime(self) -> int:
        return self.net_runtime_ms

    def get_job_id(self) -> JobID | str:
        """The job's `JobID` as PyFlink returns it ("" for a result made outside a job)."""
        return JobID(self.job_id) if self.job_id else self.job_id

    def get_all_accumulator_results(self) -> dict[str, Any]:
        """Always empty: barrierflow has no accumulators (user metrics are its counters)."""
        return {}

    def get_accumulator_result(self, accumulator_name: str) -> Any:
        """None: barrierflow has no accumulators (see `get_all_accumulator_results`)."""
        return None


def _in_background(name: str, work: Callable[[], Any]) -> Future[Any]:
    """A future completed by `work()` on a daemon thread: what PyFlink's JobClient methods
    return (its CompletableFuture has the same `result`, `exception`, `done`, `cancel`)."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as error:
            future.set_exception(error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


class JobClient:
    """A running job: wait for it, watch it, cancel it, or (for tests and demos) kill a task."""

    def __init__(self, master: Any, scratch_dir: str | None) -> None:
        self._master = master
        self._scratch = scratch_dir
        self._started = time.monotonic()
        self._result: JobExecutionResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="jobmaster", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            stats = self._master.run()
            self._result = JobExecutionResult(
                self._master.graph.job_name,
                int((time.monotonic() - self._started) * 1000),
                stats,
                self._master.status.attempt,
                self._master.job_id,
            )
        except BaseException as error:
            self._error = error
        finally:
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)
            self._master.wake_waiters()

    def wait(self, timeout: float | None = None) -> JobExecutionResult:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job still running after {timeout} s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to `timeout` s for the job to end; True once it has (then `wait` returns or
        raises at once)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def metrics(self) -> MetricsSnapshot | None:
        """The tasks' metrics as the JobMaster last published them (None before any)."""
        return self._master.metrics.snapshot

    @property
    def view(self) -> JobView | None:
        """The job's published view (state, checkpoint statistics), as REST serves it."""
        return self._master.publisher.view

    @property
    def action_token(self) -> str:
        """The token the REST endpoint's actions (and the dashboard) need: for the user who
        started the job only."""
        return self._master.action_token

    @property
    def log_dir(self) -> Path:
        """The job's log folder on the driver (spark.log, jobmaster.log, task logs)."""
        return self._master.log_dir

    @property
    def rest_url(self) -> str | None:
        """The JobMaster's REST endpoint (`http://host:port`), None while starting or when off."""
        return self._master.status.rest_url

    def get_job_status(self) -> JobStatus:
        """The job's state (a `str` enum: compares equal to "RUNNING", "FINISHED", ...).
        PyFlink returns a future of it; `.result()` on the status returns the status, so
        `get_job_status().result()` works as there."""
        return self._master.status.state

    def get_job_id(self) -> JobID:
        """The job's id (it names the job's Spark job groups, `barrierflow-<id>-<attempt>`);
        a `JobID`, which is a `str`, as PyFlink's prints."""
        return JobID(self._master.job_id)

    @property
    def job_graph(self) -> JobGraph:
        return self._master.graph

    def cancel(self, reason: str = "cancelled by the user") -> Future[None]:
        """Cancel the job (it ends CANCELED; `wait` raises JobExecutionError naming `reason`).

        Returns a future (PyFlink's shape) done once the job has ended."""
        self._master.request_cancel(reason)
        return _in_background("cancel", lambda: self._thread.join())

    def get_job_execution_result(self) -> Future[JobExecutionResult]:
        """A future of the job's JobExecutionResult (PyFlink's shape): done when the job
        ends, its `result()` raising as `wait()` does if the job failed or was cancelled."""
        return _in_background("job-execution-result", self.wait)

    def trigger_savepoint(
        self, savepoint_directory: str | None = None, *, timeout: float = 300.0
    ) -> Future[str]:
        """Take a savepoint of the running job into a new folder below `savepoint_directory`
        (None: the checkpoint config's default savepoint folder). Returns a future (PyFlink's
        shape) of that folder's URI, done once the savepoint completed; the job runs on. Its
        `result()` raises SavepointError if the savepoint failed (the job was not RUNNING,
        the folder is not writable, a task declined, it timed out) and TimeoutError if it
        did not end within `timeout` seconds."""
        folder = _savepoint_folder(savepoint_directory)
        trigger_id = self._master.trigger_savepoint(folder)
        return _in_background(
            "savepoint", lambda: self._savepoint_location(trigger_id, timeout, "savepoint")
        )

    def stop_with_savepoint(
        self,
        advance_to_end_of_event_time: bool = False,
        savepoint_directory: str | None = None,
        *,
        drain: bool | None = None,
        savepoint_dir: str | None = None,
        timeout: float = 300.0,
    ) -> Future[str]:
        """Stop the job with a savepoint (Flink's stop-with-savepoint), in PyFlink's argument
        order. Returns a future of the savepoint folder's URI, done once the job ended
        FINISHED: the sources stop (with `advance_to_end_of_event_time`, event time first
        advances to the end, so every window fires), the savepoint is the final checkpoint,
        and two-phase-commit sinks commit up to it. If the savepoint fails, the job fails over
        and runs on, and the future's `result()` raises SavepointError saying why.

        `drain=` and `savepoint_dir=` are the keywords of barrierflow's earlier order, kept.

        >>> JobClient.stop_with_savepoint(None, "/savepoints")
        Traceback (most recent call last):
        ...
        barrierflow.errors.ConfigurationError: stop_with_savepoint(advance_to_end_of_event_time, \
savepoint_directory) takes a bool first, got '/savepoints'; pass the folder as \
savepoint_directory=...
        """
        if not isinstance(advance_to_end_of_event_time, bool):
            raise ConfigurationError(
                "stop_with_savepoint(advance_to_end_of_event_time, savepoint_directory) takes a "
                f"bool first, got {advance_to_end_of_event_time!r}; pass the folder as "
                "savepoint_directory=..."
            )
        if drain is not None:
            advance_to_end_of_event_time = bool(drain)
        if savepoint_dir is not None:
            if savepoint_directory is not None:
                raise ConfigurationError(
                    "stop_with_savepoint got both savepoint_directory and savepoint_dir; pass one"
                )
            savepoint_directory = savepoint_dir
        folder = _savepoint_folder(savepoint_directory)
        trigger_id = self._master.stop_with_savepoint(folder, advance_to_end_of_event_time)

        def stopped() -> str:
            location = self._savepoint_location(trigger_id, timeout, "stop with savepoint")
            self._thread.join(timeout)  # the operation completes as the job ends FINISHED
            return location

        return _in_background("stop-with-savepoint", stopped)

    def _savepoint_location(self, trigger_id: str, timeout: float, what: str) -> str:
        from barrierflow.errors import SavepointError

        operation = self._master.publisher.wait_for_operation(trigger_id, timeout)
        if operation is None or operation.status == "IN_PROGRESS":
            raise TimeoutError(f"the {what} ({trigger_id}) did not end within {timeout} s")
        if operation.status == "FAILED" or operation.location is None:
            raise SavepointError(f"the {what} failed: {operation.failure}")
        return operation.location

    def wait_for_completed_checkpoints(self, count: int, timeout: float = 60.0) -> bool:
        """True once `count` checkpoints completed in this run (of any attempt)."""
        return (
            self._master.wait_for(
                lambda s: len(s.completed_checkpoints) >= count or s.state.is_terminal, timeout
            )
            and len(self._master.status.completed_checkpoints) >= count
        )

    def wait_until_running(self, attempt: int = 0, timeout: float = 120.0) -> bool:
        return (
            self._master.wait_for(
                lambda s: (
                    (s.state is JobStatus.RUNNING and s.attempt >= attempt) or s.state.is_terminal
                ),
                timeout,
            )
            and self._master.status.state is JobStatus.RUNNING
        )

    def task_process(self, vertex_id: int, subtask_index: int) -> tuple[str, int]:
        """(host, pid) of a running subtask's process."""
        return self._master.status.processes[SubtaskId(vertex_id, subtask_index)]

    def kill_task_process(self, vertex_id: int, subtask_index: int = 0) -> int:
        """Kill a subtask's stream-task process with SIGKILL (local masters only); its Spark
        task lives and starts a new one (the job rolls back in place). Returns the pid."""
        return kill_local(*self.task_process(vertex_id, subtask_index))

    def spark_task_process(self, vertex_id: int, subtask_index: int) -> tuple[str, int]:
        """(host, pid) of the Spark task (Python worker) that runs a subtask's stream task."""
        return self._master.spark_tasks[SubtaskId(vertex_id, subtask_index)]

    def kill_spark_task(self, vertex_id: int, subtask_index: int = 0) -> int:
        """Kill the Spark task (its Python worker) of a subtask with SIGKILL, its stream task
        with it (local masters only): the job recovers in a new Spark job. Returns the pid."""
        return kill_local(*self.spark_task_process(vertex_id, subtask_index))

    def kill_executor_jvm(self, vertex_id: int, subtask_index: int = 0) -> int:
        """Kill the executor JVM that runs a subtask's Spark task with SIGKILL, every Spark
        task and stream task it runs with it (local executors only; refused on a `local[N]`
        master, where tasks run inside the driver's JVM). The barrier stage fails and the job
        recovers in a new Spark job on the remaining executors, or on the replacement a
        standalone or local-cluster worker starts. Returns the JVM's pid."""
        host, pid = self.spark_task_process(vertex_id, subtask_index)
        check_this_host(host)
        return kill_local(host, executor_jvm_of(pid))

    def inject_failure(self, kind: str, vertex_id: int, subtask_index: int = 0) -> int:
        """Make a running subtask fail in one of FAILURE_KINDS (`barrierflow chaos`); returns
        the attempt it was aimed at (an exception aimed at an attempt that has meanwhile
        ended is dropped: that attempt is already failing)."""
        from barrierflow.cluster.mails import FailureInjectionRequested

        attempt = self.attempt
        if kind in ("exception", "restore", "storage"):  # the last two arm the next restore
            subtask = SubtaskId(vertex_id, subtask_index)
            reason = f"injected by barrierflow chaos (attempt {attempt})"
            arm = "" if kind == "exception" else kind
            self._master.mailbox.put(FailureInjectionRequested(attempt, subtask, reason, arm))
        elif kind == "kill":  # the stream task's process: respawned in place
            self.kill_task_process(vertex_id, subtask_index)
        elif kind == "executor":  # its Spark task (Python worker): a new Spark stage
            self.kill_spark_task(vertex_id, subtask_index)
        elif kind == "jvm":  # the executor JVM running its Spark task: a new Spark stage
            self.kill_executor_jvm(vertex_id, subtask_index)
        elif kind == "driver":
            raise ConfigurationError(
                "the failure kind driver kills this driver process: only `barrierflow chaos`, "
                "which runs the job in driver processes of its own, can inject it"
            )
        else:
            raise ConfigurationError(
                f"unknown failure kind {kind!r}; the kinds are {', '.join(FAILURE_KINDS)}"
            )
        return attempt

    @property
    def completed_checkpoints(self) -> tuple[int, ...]:
        return self._master.status.completed_checkpoints

    @property
    def attempt(self) -> int:
        return self._master.status.attempt

    @property
    def restored_from(self) -> int | None:
        """The checkpoint id the current attempt restored from (None: started empty)."""
        return self._master.status.restored_from


ENDED_STATES = tuple(state for state in JobStatus if state.is_terminal)
"""The job states a job never leaves (`JobStatus.is_terminal`), for `in` tests on a state."""

FAILURE_KINDS = ("exception", "kill", "executor", "jvm", "restore", "storage", "driver")
"""The failures `barrierflow chaos` injects (`JobClient.inject_failure` all but driver).
exception: the task raises ChaosFailure on its mailbox thread, as a user function would
(recovered in place). kill: SIGKILL of the stream task's process. executor: SIGKILL of the
Spark task's Python worker, which runs the stream task (its loss ends the Spark task;
recovered by a new barrier stage). jvm: SIGKILL of the executor JVM that runs the Spark task
(every task of that executor is lost; a new barrier stage on the remaining or replacement
executors); only where executors are JVMs of their own (`local-cluster[W,C,M]`, a standalone
cluster on this host), never on `local[N]`. restore: the attempt fails as for exception, and
the task then fails again while it restores (the attempt after that recovers).
storage: the attempt fails as for exception, and transient storage errors hit the
checkpoint reads of the restore that follows (the driver's `_metadata`, every task's state
files: retried with backoff) and the next `_metadata` write (that checkpoint aborts).
driver: SIGKILL of the whole driver (its Python process, Spark's JVM, the Python workers
and stream tasks), then a new driver runs the job file again and restores the newest
checkpoint (cluster/chaos_faults.py, chaos/drivers.py)."""

DEFAULT_FAILURE_KINDS = ("exception", "kill", "executor")
"""`barrierflow chaos`'s default: one attempt failure each, which every master can take. jvm
needs executor JVMs; driver starts a new driver (Spark too) per failure; restore and storage
(quick: well under 2 s each here) cost two attempt failures each (storage: the aborted
checkpoint fails over too), so the flagship's one line per failure stays as it is and they
are asked for with --kinds."""


def _savepoint_folder(folder: Any) -> str | None:
    """A savepoint folder argument: a path or URI string, or None (the default folder).

    >>> _savepoint_folder(True)
    Traceback (most recent call last):
    ...
    barrierflow.errors.ConfigurationError: a savepoint directory must be a path or URI \
string (or None for the default), got True
    """
    if folder is not None and not isinstance(folder, (str, os.PathLike)):
        raise ConfigurationError(
            "a savepoint directory must be a path or URI string (or None for the default), "
            f"got {folder!r}"
        )
    return None if folder is None else os.fspath(folder)
