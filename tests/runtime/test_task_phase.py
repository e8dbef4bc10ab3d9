"""TaskPhase's moves as one table: every (from, to) pair, allowed or refused by name."""

from __future__ import annotations

import pytest

from barrierflow.errors import IllegalTaskPhaseTransitionError
from barrierflow.runtime.task_phase import TaskPhase

R, IE, IR, FG, FD, TD = (
    TaskPhase.RUNNING,
    TaskPhase.INPUT_ENDED,
    TaskPhase.INPUT_REPORTED,
    TaskPhase.FINISHING,
    TaskPhase.FINISHED,
    TaskPhase.TORN_DOWN,
)

# Rows: from; columns: to, in the order R, IE, IR, FG, FD, TD. "+" allowed, "." refused.
MOVES = {
    R: "  . + . + . +",  # input ends (source), final checkpoint (no source), or torn down
    IE: " . . + . . +",  # EndOfInput reported
    IR: " . . . + . +",  # the final checkpoint completed
    FG: " . . . . + +",  # closed and reported finished
    FD: " . . . . . +",
    TD: " + . . . . .",  # restart: the next attempt
}
COLUMNS = (R, IE, IR, FG, FD, TD)

CASES = [
    (source, target, mark == "+")
    for source, row in MOVES.items()
    for target, mark in zip(COLUMNS, row.split(), strict=True)
]


@pytest.mark.parametrize(("source", "target", "allowed"), CASES)
def test_a_move_is_allowed_or_refused_naming_both_phases(
    source: TaskPhase, target: TaskPhase, allowed: bool
) -> None:
    if allowed:
        assert source.to(target) is target
    else:
        with pytest.raises(IllegalTaskPhaseTransitionError) as refused:
            source.to(target)
        assert str(refused.value) == f"a task cannot move from {source.value} to {target.value}"


def test_the_table_covers_every_phase() -> None:
    assert set(MOVES) == set(TaskPhase) == set(COLUMNS)


@pytest.mark.parametrize(
    ("phase", "source_ended", "final_checkpoint_done"),
    [(R, False, False), (IE, True, False), (IR, True, False), (FG, True, True),
     (FD, True, True), (TD, True, False)],
)  # fmt: skip
def test_what_each_phase_tells_the_task(
    phase: TaskPhase, source_ended: bool, final_checkpoint_done: bool
) -> None:
    assert (phase.source_ended, phase.final_checkpoint_done) == (
        source_ended,
        final_checkpoint_done,
    )
