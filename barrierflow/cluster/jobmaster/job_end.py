"""How a job ends: FINISHED, FAILED or CANCELED, once, leaving no task running.

A part of the JobMaster (job_master.py), by role: `_end` records the outcome, sweeps the
shared checkpoint files and closes the endpoints; a job that did not finish first has its
sinks cleaned up (sink_cleanup.py) once its tasks are gone, as a restore of its newest
checkpoint would. `_crash` is the path of an unexpected error. JobMaster thread only.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time

from barrierflow.checkpoint.lease import probe_process
from barrierflow.checkpoint.lease_rules import ProcessState
from barrierflow.checkpoint.stats import CheckpointStats
from barrierflow.cluster.jobmaster.sink_cleanup import clean_up_sinks
from barrierflow.cluster.jobmaster.views import JobStatus
from barrierflow.errors import CheckpointStorageError, JobExecutionError

log = logging.getLogger("barrierflow.cluster.jobmaster.job_master")  # the JobMaster's log

TASKS_GONE_TIMEOUT_S = 30.0
"""How long a job's end waits for its tasks to be gone before it cleans up the sinks."""
DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
"""The externalized retention (JobSettings) that deletes the job's checkpoints on cancel."""


class JobEnd:
    """The JobMaster's end of a job (a base of JobMaster: it works on the JobMaster's state)."""

    def _fail_job(self, error: BaseException) -> None:
        """End the job FAILED with `error` (the current attempt, if any, already stopped)."""
        log.warning("job '%s' failed: %s", self.graph.job_name, error)
        self.publisher.publish(state=JobStatus.FAILED)
        self._end(job_error(f"job '{self.graph.job_name}' failed: {error}", error))

    def _end_cancelled(self) -> None:
        self._clean_up_sinks()  # reads the newest checkpoint: before it may be deleted
        if self.settings.externalized_retention == DELETE_ON_CANCELLATION:
            try:
                self.storage.discard_all()
            except (OSError, CheckpointStorageError) as error:
                log.warning("could not delete the checkpoints in %s: %s", self.storage.job_dir,
                            error)  # fmt: skip
        self.publisher.publish(state=JobStatus.CANCELED)
        self._end(job_error(f"job '{self.graph.job_name}' was cancelled: "
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
            self.publisher.publish(state=JobStatus.FAILED)
        crashed = job_error(f"job '{self.graph.job_name}' failed on an unexpected error: "
                            f"{type(error).__name__}: {error}", error)  # fmt: skip
        crashed.__suppress_context__ = False  # the crash keeps its whole story
        self._end(crashed)

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


def job_error(message: str, cause: BaseException | None) -> JobExecutionError:
    """What `run` raises for a job that did not finish: `cause` chained (None: nothing)."""
    error = JobExecutionError(message)
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error
