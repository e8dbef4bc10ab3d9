"""The failover decision: what the job does after an attempt failed, as a value.

`FailoverDecider` holds the only state the decision needs (the restart strategy's tracker
and the repeated-failure streak) and takes everything else as arguments, the clock's
reading included: a failure in, a `FailoverDecision` out (restart in place, restart in a
new stage, fail the job, or end it cancelled), nothing done. The JobMaster applies the
decision (job_failover.py): it stops or rolls back the attempt, publishes, logs and
schedules the restart. Tested event by event in tests/cluster/test_failover.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailure
from barrierflow.cluster.jobmaster.repeated_failures import RepeatedFailures
from barrierflow.cluster.jobmaster.restore_point import GiveUp
from barrierflow.cluster.jobmaster.views import Recovery
from barrierflow.core.restart_strategies import RestartDecision, RestartTracker

__all__ = ["FailoverDecider", "FailoverDecision", "Outcome", "asks_restore"]

RestoreVerdict = RestartDecision | GiveUp | None
"""What the restore says of a failure (JobRestore.failure_decision): fall back at once,
give up, or None (the restart strategy decides)."""


class Outcome(Enum):
    RESTART = "restart"
    FAIL = "fail"
    CANCEL = "cancel"


@dataclass(frozen=True)
class FailoverDecision:
    """What to do after a failure. JobMaster thread only."""

    outcome: Outcome
    recovery: Recovery = Recovery.NONE
    """IN_PLACE or NEW_STAGE for a restart (in place only while every task process lives:
    the JobMaster takes a new stage if the roll-back cannot be done after all)."""
    delay_ms: int | None = None
    """The restart delay; None unless it restarts."""
    explanation: str = ""
    """The strategy's (or the restore's) word on it: the exception history shows it."""
    error: BaseException | None = None
    """FAIL: the error the job fails with as it is (a fatal failure, a restore that gives up);
    None: the failure itself, with "will not restart" and the explanation."""


def asks_restore(failure: AttemptFailure, cancel_requested: bool) -> bool:
    """Whether the decision needs the restore's verdict on `failure` (asking it marks a
    damaged checkpoint, so it is asked only when its answer counts)."""
    return not cancel_requested and not (failure.fatal and failure.cause is not None)


class FailoverDecider:
    """Decides each failure of a job's attempts. JobMaster thread only.

    Guarantees: a cancel requested ends the job cancelled whatever failed; a fatal failure
    (with a cause) fails the job, counting no restart; a restore verdict (fall back at once,
    give up) overrides the strategy and counts no restart; otherwise the restart strategy
    decides, unless the same failure keeps coming back from the same restore point (then the
    job fails, though the strategy would restart). Assumes it hears of every failure in order
    and of every completed checkpoint (`progressed`).
    """

    def __init__(self, strategy: RestartTracker, repeated: RepeatedFailures) -> None:
        self._strategy = strategy
        self._repeated = repeated

    def progressed(self) -> None:
        """A checkpoint completed: the same failure again is no longer "in a row"."""
        self._repeated.progressed()

    def attempt_failed(
        self,
        failure: AttemptFailure,
        now_ms: int,
        *,
        cancel_requested: bool = False,
        restore_verdict: RestoreVerdict = None,
        restored: str | None = None,
        tasks_alive: bool = False,
    ) -> FailoverDecision:
        """The decision on `failure` of an attempt that restored `restored` ("checkpoint 7";
        None: nothing) with `restore_verdict` (asked only if `asks_restore`), its task
        processes all alive or not."""
        if cancel_requested:
            return FailoverDecision(Outcome.CANCEL, explanation="cancelled")
        if not asks_restore(failure, cancel_requested):
            return FailoverDecision(
                Outcome.FAIL, explanation="no restart can help", error=failure.cause
            )
        if isinstance(restore_verdict, GiveUp):
            return FailoverDecision(
                Outcome.FAIL, explanation=str(restore_verdict.error), error=restore_verdict.error
            )
        decision = restore_verdict or self._strategy_decision(failure, restored, now_ms)
        if not decision.restart:
            return FailoverDecision(Outcome.FAIL, explanation=decision.explanation)
        recovery = Recovery.IN_PLACE if tasks_alive else Recovery.NEW_STAGE
        return FailoverDecision(Outcome.RESTART, recovery, decision.delay_ms, decision.explanation)

    def storage_unreadable(self, error: BaseException, now_ms: int) -> FailoverDecision:
        """The checkpoint storage did not answer while an attempt chose what to restore: the
        restart strategy alone decides (a new stage: no task runs), failing with `error`."""
        decision = self._strategy.decide(now_ms)
        if not decision.restart:  # the history shows the strategy's delay, as it always did
            return FailoverDecision(
                Outcome.FAIL, delay_ms=decision.delay_ms, explanation=decision.explanation,
                error=error,
            )  # fmt: skip
        return FailoverDecision(
            Outcome.RESTART, Recovery.NEW_STAGE, decision.delay_ms, decision.explanation
        )

    def _strategy_decision(
        self, failure: AttemptFailure, restored: str | None, now_ms: int
    ) -> RestartDecision:
        """The restart strategy's decision, unless it would restart though the same failure
        keeps coming back from the same restore point (a record that always fails): then the
        job fails (a strategy that gives up anyway keeps its own explanation)."""
        give_up = self._repeated.failed(restored, failure.signature)
        decision = self._strategy.decide(now_ms)
        if decision.restart and give_up is not None:
            return RestartDecision(False, 0, give_up)
        return decision
