"""How a job ends: FINISHED, FAILED or CANCELED, once, leaving no task running.

One of the JobMaster's roles (job_master.py), an object of its own that sees the JobMaster
only as an `EndHost` (hosts.py): `end` records the outcome, sweeps the shared checkpoint
files and closes the endpoints; a job that did not finish first has its sinks cleaned up
(sink_cleanup.py) once its tasks are gone, as a restore of its newest checkpoint would,
once. `crash` is the path of an unexpected error. JobMaster thread only.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from typing import TYPE_CHECKING

from barrierflow.checkpoint.lease import probe_process
from barrierflow.checkpoint.lease_rules import ProcessState
from barrierflow.checkpoint.stats import CheckpointStats
from barrierflow.cluster.jobmaster.sink_cleanup import clean_up_sinks
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.errors import CheckpointStorageError, JobExecutionError

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.hosts import EndHost

log = logging.getLogger("barrierflow.cluster.jobmaster.job_master")  # the JobMaster's log

TASKS_GONE_TIMEOUT_S = 30.0
"""How long a job's end waits for its tasks to be gone before it cleans up the sinks."""
DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
"""The externalized retention (JobSettings) that deletes the job's checkpoints on cancel."""


class JobEnd:
    """The JobMaster's end of a job: FINISHED, FAILED or CANCELED, once."""

    def __init__(self, master: EndHost) -> None:
        self.master = master
        self._sinks_cleaned = False
        """The sinks were cleaned up (or that was tried) at the job's end: once only."""

    def fail_job(self, error: BaseException) -> None:
        """End the job FAILED with `error` (the current attempt, if any, already stopped)."""
        name = self.master.graph.job_name
        log.warning("job '%s' failed: %s", name, error)
        self.master.publisher.publish(state=JobStatus.FAILED)
        self.end(job_error(f"job '{name}' failed: {error}", error))

    def end_cancelled(self) -> None:
        """End the job CANCELED (no attempt runs): its sinks cleaned up, its checkpoints
        deleted if its retention says so."""
        master = self.master
        self._clean_up_sinks()  # reads the newest checkpoint: before it may be deleted
        if master.settings.externalized_retention == DELETE_ON_CANCELLATION:
            try:
                master.storage.discard_all()
            except (OSError, CheckpointStorageError) as error:
                log.warning("could not delete the checkpoints in %s: %s",
                            master.storage.job_dir, error)  # fmt: skip
        master.publisher.publish(state=JobStatus.CANCELED)
        self.end(job_error(f"job '{master.graph.job_name}' was cancelled: "
                           f"{master.cancel_requested}", None))  # fmt: skip

    def crash(self, error: Exception) -> None:
        """The crash path: an unexpected error fails the job and leaves no task running."""
        master = self.master
        name = master.graph.job_name
        log.error("job '%s' failed on an unexpected error", name, exc_info=error)
        if master.attempt is not None:
            with contextlib.suppress(Exception):
                master.stop_attempt()
        if master.restart is not None:
            master.restart.cancel()
        with contextlib.suppress(Exception):
            master.failing_over.leave_stage("the job failed")
        with contextlib.suppress(Exception):
            master.publisher.publish(state=JobStatus.FAILED)
        crashed = job_error(f"job '{name}' failed on an unexpected error: "
                            f"{type(error).__name__}: {error}", error)  # fmt: skip
        crashed.__suppress_context__ = False  # the crash keeps its whole story
        self.end(crashed)

    def end(self, outcome: list[CheckpointStats] | BaseException) -> None:
        """Record the job's outcome (the checkpoints of a finished job, or the error `run`
        raises), sweep shared/ while the lease is held, and close the JobMaster."""
        master = self.master
        if isinstance(outcome, BaseException):  # a finished job's sinks closed cleanly
            self._clean_up_sinks()
        if master.lease.held:  # no checkpoint of this run completes any more: sweep shared/
            try:
                master.storage.sweep_shared()
            except Exception as error:  # never changes the outcome: the next start sweeps
                log.warning("job '%s': shared checkpoint files not swept: %s: %s",
                            master.graph.job_name, type(error).__name__, error)  # fmt: skip
        master.outcome = outcome
        master.ended = True
        ended = "the job finished" if isinstance(outcome, list) else str(outcome)
        master.publisher.fail_operations(f"{ended} before the savepoint completed")
        with contextlib.suppress(Exception):
            master.close()

    def _clean_up_sinks(self) -> None:
        """The job ended for good without finishing: once its tasks are gone, resolve what its
        sinks left (sink_cleanup.py) as a restore of its newest completed checkpoint would.
        Only while this run holds the folder's lease (a run that lost it touches nothing);
        never raises: a failure is one logged line, the job's outcome stays what it is."""
        master = self.master
        if self._sinks_cleaned or master.runner is None or not master.lease.held:
            return
        self._sinks_cleaned = True
        name = master.graph.job_name
        try:
            self._await_tasks_gone()
            master.starting.renew_lease()  # the wait may outlast the expiry: still ours?
            point = master.restoring.choose()
            result = clean_up_sinks(
                master.graph,
                point,
                master.restoring.abandoned_above,
                lineage=master.lineage,
                deployment_id=f"{master.run_id}-cleanup",
                attempt=master.status.attempt + 1,
                clock=master.clock,
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
        master = self.master
        deadline = time.monotonic() + TASKS_GONE_TIMEOUT_S
        assert master.runner is not None
        master.runner.wait_ended(master.spark_group(master.stage), TASKS_GONE_TIMEOUT_S)
        here = {socket.gethostname(), "localhost", "127.0.0.1"}
        pids = [pid for host, pid in master.status.processes.values() if host in here]
        while any(probe_process(pid, None) is ProcessState.ALIVE for pid in pids):
            if time.monotonic() > deadline:
                log.warning("job '%s': task processes still run %.0f s after the job ended; "
                            "cleaning up its sinks anyway", master.graph.job_name,
                            TASKS_GONE_TIMEOUT_S)  # fmt: skip
                return
            time.sleep(0.05)


def job_error(message: str, cause: BaseException | None) -> JobExecutionError:
    """What `run` raises for a job that did not finish: `cause` chained (None: nothing)."""
    error = JobExecutionError(message)
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error
