"""How the JobMaster applies a failover decision (failover.py decides it).

A part of the JobMaster (job_master.py), by role. After an attempt failed it asks its
`FailoverDecider` (passing the restore's verdict only when it counts, `asks_restore`), then
does what the decision says: end the job cancelled or failed, or restart after the delay,
in place (rollback.py: the tasks and their Spark job stay) or in a new barrier stage. Each
failure goes into the exception history the REST endpoint shows. JobMaster thread only.
"""

from __future__ import annotations

import logging

from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailure
from barrierflow.cluster.jobmaster.failover import FailoverDecision, Outcome, asks_restore
from barrierflow.cluster.jobmaster.job_end import job_error
from barrierflow.cluster.jobmaster.rollback import roll_back
from barrierflow.cluster.jobmaster.views import FailureEntry, JobStatus, Recovery
from barrierflow.errors import CheckpointStorageUnavailableError

log = logging.getLogger("barrierflow.cluster.jobmaster.job_master")  # the JobMaster's log


class JobFailover:
    """The JobMaster's failover (a base of JobMaster: it works on the JobMaster's state)."""

    def _attempt_failed(self, failure: AttemptFailure) -> None:
        assert self.attempt is not None and self._runner is not None
        self.savepoints.attempt_failed(failure.summary)
        attempt, name = self.attempt, self.graph.job_name
        number, cancel, group = attempt.number, self._runner.cancel, self._group(self._stage)
        cancelled = self._cancel_requested is not None
        point = self.restoring.point
        decision = self.failover.attempt_failed(
            failure,
            self.clock.epoch_millis(),
            cancel_requested=cancelled,
            restore_verdict=(
                self.restoring.failure_decision(attempt.checkpoints is not None, failure)
                if asks_restore(failure, cancelled)
                else None
            ),
            restored=None if point is None else point.candidate.describe(),
            tasks_alive=attempt.live_tasks() is not None,
        )
        if decision.recovery is Recovery.IN_PLACE:
            rollback = roll_back(attempt, self._stage, failure, decision.delay_ms or 0,
                                 lambda: cancel(group))  # fmt: skip
            if rollback is not None:
                self.attempt, self._rollback = None, rollback
                self._abandon_rollback_if_broken()
        if self.attempt is not None:
            self._stop_attempt()
        if decision.outcome is Outcome.CANCEL:
            self._end_cancelled()
            return
        if decision.outcome is Outcome.FAIL:
            self._record_failure(failure, number, decision)
            if decision.error is not None:
                if not failure.fatal:  # a restore that gave up: the failure, then why
                    log.warning("job '%s' attempt %d failed: %s", name, number, failure.summary)
                self._fail_job(decision.error)
                return
            log.warning("job '%s' attempt %d failed: %s", name, number, failure.summary)
            self.publisher.publish(state=JobStatus.FAILED)
            self._end(job_error(f"{failure.summary}; job '{name}' failed and will not restart "
                                f"({decision.explanation})", failure.cause))  # fmt: skip
            return
        recovery = Recovery.IN_PLACE if self._rollback is not None else Recovery.NEW_STAGE
        decision = FailoverDecision(decision.outcome, recovery, decision.delay_ms,
                                    decision.explanation)  # fmt: skip
        log.warning(
            "job '%s' attempt %d failed: %s; %s, %s in %d ms",
            name,
            number,
            failure.summary,
            decision.explanation,
            "restarting in place" if recovery is Recovery.IN_PLACE else "restarting in a new stage",
            decision.delay_ms,
        )
        self._record_failure(failure, number, decision)
        self._schedule_restart(number, decision.delay_ms or 0)

    def _restore_unreadable(self, number: int, error: CheckpointStorageUnavailableError) -> None:
        """The storage failed to answer while attempt `number` chose what to restore: the
        restart strategy alone decides, and the next attempt reads the same checkpoint."""
        decision = self.failover.storage_unreadable(error, self.clock.epoch_millis())
        self._record_failure(AttemptFailure(str(error), error), number, decision)
        if decision.outcome is not Outcome.RESTART:
            self._fail_job(error)
            return
        log.warning("job '%s': %s; retrying through the restart strategy (%s) in %d ms",
                    self.graph.job_name, error, decision.explanation,
                    decision.delay_ms)  # fmt: skip
        self._schedule_restart(number, decision.delay_ms or 0)

    def _schedule_restart(self, number: int, delay_ms: int) -> None:
        """RESTARTING: attempt `number` + 1 starts after `delay_ms`."""
        self.publisher.publish(state=JobStatus.RESTARTING)
        self._restart = self.scheduler.schedule(
            delay_ms, lambda: self._start_attempt(number + 1), f"restart as attempt {number + 1}"
        )

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

    def _record_failure(
        self, failure: AttemptFailure, attempt: int, decision: FailoverDecision
    ) -> None:
        """Add the failure to the exception history the REST endpoint shows."""
        exception = None if failure.cause is None else type(failure.cause).__name__
        self.publisher.record_failure(FailureEntry(
            self.clock.epoch_millis(), attempt, failure.summary, exception, failure.task,
            failure.traceback, decision.recovery, decision.delay_ms, decision.explanation,
        ))  # fmt: skip
