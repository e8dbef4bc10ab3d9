"""The failover decision (cluster/jobmaster/failover.py), event by event.

Each scenario is a table: one row per failure (or storage outage), with the clock's reading
and the facts the JobMaster passes in, and the decision the pure `FailoverDecider` must
return for it. Real restart strategies (their trackers), real `RepeatedFailures`; nothing
applied, so a row's decision depends only on the rows before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.cluster.jobmaster.attempt_failure import AttemptFailure
from barrierflow.cluster.jobmaster.failover import (
    FailoverDecider,
    FailoverDecision,
    Outcome,
    asks_restore,
)
from barrierflow.cluster.jobmaster.repeated_failures import RepeatedFailures
from barrierflow.cluster.jobmaster.restore_point import GiveUp
from barrierflow.cluster.jobmaster.views import Recovery
from barrierflow.core.restart_strategies import RestartDecision
from barrierflow.errors import StateRestoreError

BAD = ValueError("bad record 'x'")
RECORD = AttemptFailure("ValueError: bad record 'x'", BAD, signature="map|ValueError|x")
LOST = AttemptFailure("the process of 'map' (1/1) was lost")  # no signature: never repeats
UNREACHABLE = ConnectionError("the tasks cannot reach the JobMaster")
FATAL = AttemptFailure("the tasks cannot reach the JobMaster", UNREACHABLE, fatal=True)
RESTORE_ERROR = StateRestoreError("restoring checkpoint 3 failed twice in a row")
FALL_BACK = RestartDecision(True, 0, "falling back to an older checkpoint")
STORAGE_DOWN = OSError("the checkpoint storage does not answer")


@dataclass(frozen=True)
class Failed:
    """An attempt failed at `at_ms` (the facts the JobMaster gathers)."""

    at_ms: int
    failure: AttemptFailure = RECORD
    restored: str | None = "checkpoint 4"
    alive: bool = True
    cancelled: bool = False
    verdict: RestartDecision | GiveUp | None = None


@dataclass(frozen=True)
class Progressed:
    """A checkpoint completed."""


@dataclass(frozen=True)
class StorageDown:
    """The storage did not answer while the next attempt chose what to restore."""

    at_ms: int


def in_place(delay_ms: int, explanation: str) -> FailoverDecision:
    return FailoverDecision(Outcome.RESTART, Recovery.IN_PLACE, delay_ms, explanation)


def new_stage(delay_ms: int, explanation: str) -> FailoverDecision:
    return FailoverDecision(Outcome.RESTART, Recovery.NEW_STAGE, delay_ms, explanation)


def fails(explanation: str, error: BaseException | None = None, delay_ms: int | None = None):
    return FailoverDecision(Outcome.FAIL, Recovery.NONE, delay_ms, explanation, error)


CANCELLED = FailoverDecision(Outcome.CANCEL, explanation="cancelled")


def run(decider: FailoverDecider, events: list) -> list[FailoverDecision | None]:
    decisions: list[FailoverDecision | None] = []
    for event in events:
        if isinstance(event, Progressed):
            decider.progressed()
            decisions.append(None)
        elif isinstance(event, StorageDown):
            decisions.append(decider.storage_unreadable(STORAGE_DOWN, event.at_ms))
        else:
            decisions.append(
                decider.attempt_failed(
                    event.failure,
                    event.at_ms,
                    cancel_requested=event.cancelled,
                    restore_verdict=event.verdict,
                    restored=event.restored,
                    tasks_alive=event.alive,
                )
            )
    return decisions


def decider(strategy=None, repeated_limit: int | None = 3) -> FailoverDecider:
    config = strategy or RestartStrategies.fixed_delay_restart(2, 100)
    return FailoverDecider(config.new_tracker(), RepeatedFailures(repeated_limit))


def _explanations() -> tuple[str, str, str]:
    """The fixed-delay strategy's own words for its restarts and its giving up."""
    tracker = RestartStrategies.fixed_delay_restart(2, 100).new_tracker()
    return tuple(tracker.decide(0).explanation for _ in range(3))  # type: ignore[return-value]


FIRST, SECOND, GAVE_UP = _explanations()

SCENARIOS = {
    "live tasks roll back in place, lost ones take a new stage, then the strategy gives up": [
        (Failed(0), in_place(100, FIRST)),
        (Failed(1000, LOST, alive=False), new_stage(100, SECOND)),
        (Failed(2000, LOST), fails(GAVE_UP)),
    ],
    "a cancel ends the job whatever failed, counting no restart": [
        (Failed(0, cancelled=True), CANCELLED),
        (Failed(0, FATAL, cancelled=True), CANCELLED),
        (Failed(0, LOST), in_place(100, FIRST)),
    ],
    "a fatal failure fails at once with its cause and counts no restart": [
        (Failed(0, FATAL), fails("no restart can help", UNREACHABLE)),
        (Failed(10, LOST), in_place(100, FIRST)),
    ],
    "a damaged checkpoint falls back at once, no restart counted, no delay": [
        (Failed(0, verdict=FALL_BACK, alive=False), new_stage(0, FALL_BACK.explanation)),
        (Failed(10, verdict=FALL_BACK), in_place(0, FALL_BACK.explanation)),
        (Failed(20, LOST), in_place(100, FIRST)),
        (Failed(30, LOST), in_place(100, SECOND)),
    ],
    "a restore that gives up fails the job with its error": [
        (Failed(0, verdict=GiveUp(RESTORE_ERROR)), fails(str(RESTORE_ERROR), RESTORE_ERROR)),
    ],
    "a storage outage while choosing the restore: the strategy alone decides, a new stage": [
        (StorageDown(0), new_stage(100, FIRST)),
        (StorageDown(500), new_stage(100, SECOND)),
        (StorageDown(900), fails(GAVE_UP, STORAGE_DOWN, delay_ms=0)),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str) -> None:
    rows = SCENARIOS[name]
    assert run(decider(), [event for event, _ in rows]) == [expected for _, expected in rows]


def test_the_same_failure_from_one_restore_point_fails_though_the_strategy_would_restart():
    unlimited = RestartStrategies.fixed_delay_restart(1000, 0)
    decisions = run(
        decider(unlimited, repeated_limit=3),
        [
            Failed(0),
            Failed(10),
            Progressed(),  # a checkpoint completed: the count starts again
            Failed(20),
            Failed(30, restored="checkpoint 5"),  # another restore point: again
            Failed(40, restored="checkpoint 5"),
            Failed(50, restored="checkpoint 5"),
        ],
    )
    outcomes = [d and (d.outcome, d.recovery) for d in decisions]
    restart, fail = (Outcome.RESTART, Recovery.IN_PLACE), (Outcome.FAIL, Recovery.NONE)
    assert outcomes == [restart, restart, None, restart, restart, restart, fail]
    last = decisions[-1]
    assert last is not None and last.error is None and last.delay_ms is None
    assert last.explanation.startswith("the same failure 3 times in a row from checkpoint 5")


def test_a_strategy_that_gives_up_anyway_keeps_its_own_explanation():
    decisions = run(decider(RestartStrategies.no_restart(), repeated_limit=1), [Failed(0)])
    assert decisions == [fails("the restart strategy is no_restart")]


def test_the_failure_rate_strategy_reads_the_clock_passed_in():
    rate = RestartStrategies.failure_rate_restart(2, 1000, 10)
    decisions = run(decider(rate), [Failed(0, LOST), Failed(500, LOST), Failed(900, LOST)])
    assert [d.outcome for d in decisions] == [Outcome.RESTART, Outcome.RESTART, Outcome.FAIL]
    spaced = run(decider(rate), [Failed(0, LOST), Failed(500, LOST), Failed(5000, LOST)])
    assert [d.outcome for d in spaced] == [Outcome.RESTART] * 3


def test_the_restore_is_asked_only_when_its_verdict_counts():
    assert asks_restore(RECORD, cancel_requested=False)
    assert not asks_restore(RECORD, cancel_requested=True)
    assert not asks_restore(FATAL, cancel_requested=False)
    assert asks_restore(AttemptFailure("fatal without a cause", fatal=True), False)
