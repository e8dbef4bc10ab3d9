"""How the JobMaster applies a failover decision (failover.py decides it).

One of the JobMaster's roles (job_master.py), an object of its own that sees the JobMaster
only as a `FailoverHost` (hosts.py). After an attempt failed it asks the `FailoverDecider`
(passing the restore's verdict only when it counts, `asks_restore`), then does what the
decision says: end the job cancelled or failed (through the end role), or restart after the
delay (through the start role), in place (rollback.py: the tasks and their Spark job stay)
or in a new barrier stage. Each failure goes into the exception history the REST endpoint
shows. JobMaster thread only.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailure
from barrierflow.cluster.jobmaster.failover import FailoverDecision, Outcome, asks_restore
from barrierflow.cluster.jobmaster.job_end import job_error
from barrierflow.cluster.jobmaster.rollback import roll_back
from barrierflow.cluster.jobmaster.views import FailureEntry, JobStatus, Recovery
from barrierflow.errors import CheckpointStorageUnavailableError

if TYPE_CHECKING:
    from barrierflow.cluster.jobmaster.hosts import FailoverHost

log = logging.getLogger("barrierflow.cluster.jobmaster.job_master")  # the JobMaster's log


class JobFailover:
    """The JobMaster's failover: what an attempt's failure leads to."""

    def __init__(self, master: FailoverHost) -> None:
        self.master = master

    def attempt_failed(self, failure: AttemptFailure) -> None:
        """The current attempt failed: decide, stop it (or keep its tasks for a roll-back
        in place), then end the job or schedule the next attempt."""
        master = self.master
        attempt, runner = master.attempt, master.runner
        assert attempt is not None and runner is not None
        master.savepoints.attempt_failed(failure.summary)
        name, number, stage = master.graph.job_name, attempt.number, master.stage
        cancel, group = runner.cancel, master.spark_group(stage)
        cancelled = master.cancel_requested is not None
        point = master.restoring.point
        decision = master.failover.attempt_failed(
            failure,
            master.clock.epoch_millis(),
            cancel_requested=cancelled,
            restore_verdict=(
                master.restoring.failure_decision(attempt.checkpoints is not None, failure)
                if asks_restore(failure, cancelled)
                else None
            ),
            restored=None if point is None else point.candidate.describe(),
            tasks_alive=attempt.live_tasks() is not None,
        )
        if decision.recovery is Recovery.IN_PLACE:
            rollback = roll_back(attempt, stage, failure, decision.delay_ms or 0,
                                 lambda: cancel(group))  # fmt: skip
            if rollback is not None:
                master.attempt, master.rollback = None, rollback
                self.abandon_rollback_if_broken()
        if master.attempt is not None:
            master.stop_attempt()
        if decision.outcome is Outcome.CANCEL:
            master.ending.end_cancelled()
            return
        if decision.outcome is Outcome.FAIL:
            self._record_failure(failure, number, decision)
            if decision.error is not None:
                if not failure.fatal:  # a restore that gave up: the failure, then why
                    log.warning("job '%s' attempt %d failed: %s", name, number, failure.summary)
                master.ending.fail_job(decision.error)
                return
            log.warning("job '%s' attempt %d failed: %s", name, number, failure.summary)
            master.publisher.publish(state=JobStatus.FAILED)
            master.ending.end(job_error(f"{failure.summary}; job '{name}' failed and will not "
                                        f"restart ({decision.explanation})",
                                        failure.cause))  # fmt: skip
            return
        recovery = Recovery.IN_PLACE if master.rollback is not None else Recovery.NEW_STAGE
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

    def restore_unreadable(self, number: int, error: CheckpointStorageUnavailableError) -> None:
        """The storage failed to answer while attempt `number` chose what to restore: the
        restart strategy alone decides, and the next attempt reads the same checkpoint."""
        master = self.master
        decision = master.failover.storage_unreadable(error, master.clock.epoch_millis())
        self._record_failure(AttemptFailure(str(error), error), number, decision)
        if decision.outcome is not Outcome.RESTART:
            master.ending.fail_job(error)
            return
        log.warning("job '%s': %s; retrying through the restart strategy (%s) in %d ms",
                    master.graph.job_name, error, decision.explanation,
                    decision.delay_ms)  # fmt: skip
        self._schedule_restart(number, decision.delay_ms or 0)

    def _schedule_restart(self, number: int, delay_ms: int) -> None:
        """RESTARTING: attempt `number` + 1 starts after `delay_ms`."""
        master, starting = self.master, self.master.starting
        master.publisher.publish(state=JobStatus.RESTARTING)
        master.restart = master.scheduler.schedule(
            delay_ms, lambda: starting.start_attempt(number + 1), f"restart as attempt {number + 1}"
        )

    def abandon_rollback_if_broken(self) -> None:
        """A process or the Spark job was lost during a roll-back: the next attempt takes a new
        stage, and the kept tasks and Spark job go now, freeing their slots."""
        rollback = self.master.rollback
        if rollback is not None and rollback.broken is not None:
            log.info("job '%s': %s", self.master.graph.job_name, rollback.broken)
            self.leave_stage(rollback.broken)

    def leave_stage(self, reason: str) -> None:
        """Stop the tasks kept for a roll-back in place, if any (their Spark job with them)."""
        rollback, self.master.rollback = self.master.rollback, None
        if rollback is not None:
            rollback.stop(reason)

    def _record_failure(
        self, failure: AttemptFailure, attempt: int, decision: FailoverDecision
    ) -> None:
        """Add the failure to the exception history the REST endpoint shows."""
        exception = None if failure.cause is None else type(failure.cause).__name__
        self.master.publisher.record_failure(FailureEntry(
            self.master.clock.epoch_millis(), attempt, failure.summary, exception, failure.task,
            failure.traceback, decision.recovery, decision.delay_ms, decision.explanation,
        ))  # fmt: skip
