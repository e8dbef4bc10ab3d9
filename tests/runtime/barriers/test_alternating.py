"""CheckpointBarrierUnaligner.alternating, event by event: aligned checkpoints with a timeout."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import blocked, cancel, end, latest, open_channels, timestamp_of
from scenario_unaligned import (
    Scenario,
    arm,
    arrive,
    barrier,
    cancelled,
    check_exactly_once,
    complete,
    current,
    input_ended,
    numbered_streams,
    persisting,
    phase,
    play,
    poll,
    run,
    stop,
    subsumed,
    timeout,
    trigger,
    unaligned,
)

from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner, Phase
from barrierflow.runtime.elements import CheckpointBarrier

ALIGNING, UNALIGNED = Phase.ALIGNING, Phase.UNALIGNED
TIMEOUT_MS = 100
T1 = timestamp_of(1)
"""The trigger time of checkpoint 1 in these tables."""

SCENARIOS = [
    Scenario(
        "the first barrier to arrive starts the alignment and arms the timer",
        channels=2,
        steps=[
            arrive(1, ch=0), phase(ALIGNING), current(1), latest(1),
            # the barrier is still queued behind data: nothing is blocked yet
            blocked(), persisting(),
            poll(1, ch=0), blocked(0),
        ],
        decisions=[arm(1, TIMEOUT_MS)],
    ),
    Scenario(
        "an alignment that completes before the timeout triggers aligned, with no channel state",
        channels=3,
        steps=[
            barrier(1, ch=0), blocked(0),
            arrive(1, ch=2), blocked(0),
            poll(1, ch=2), blocked(0, 2),
            barrier(1, ch=1), blocked(), phase(None),
            # the timer fires after all: too late to matter
            timeout(1), phase(None),
        ],
        decisions=[arm(1, TIMEOUT_MS), trigger(1)],
    ),
    Scenario(
        "the timeout switches to unaligned, persisting exactly the channels before their barrier",
        channels=4,
        steps=[
            barrier(1, ch=0), blocked(0),
            arrive(1, ch=1), blocked(0),
            # channel 0 polled its barrier: what it holds is after it, so it is left out;
            # channel 1's barrier is queued: its data up to the barrier is in flight, and done;
            # channels 2 and 3 have no barrier yet: everything they hold or get until it is
            timeout(1), phase(UNALIGNED), blocked(), persisting(2, 3),
            arrive(1, ch=3), persisting(2),
            poll(1, ch=1), poll(1, ch=3),
            arrive(1, ch=2), persisting(), phase(None),
        ],
        decisions=[
            arm(1, TIMEOUT_MS),
            unaligned(1, {1, 2, 3}), stop(1, 1),
            stop(3, 1),
            stop(2, 1), complete(1),
        ],
    ),
    Scenario(
        "a timeout after every barrier arrived completes at once",
        channels=2,
        steps=[barrier(1, ch=0), arrive(1, ch=1), timeout(1), blocked(), persisting(), phase(None)],
        decisions=[arm(1, TIMEOUT_MS), unaligned(1, {1}), stop(1, 1), complete(1)],
    ),
    Scenario(
        "after a switch the next checkpoint aligns again",
        channels=2,
        steps=[
            barrier(1, ch=0), timeout(1), barrier(1, ch=1),
            barrier(2, ch=1), phase(ALIGNING), blocked(1), barrier(2, ch=0),
        ],
        decisions=[
            arm(1, TIMEOUT_MS), unaligned(1, {1}), stop(1, 1), complete(1),
            arm(2, TIMEOUT_MS), trigger(2),
        ],
    ),
    Scenario(
        "a savepoint never arms a timer and never switches",
        channels=2,
        steps=[
            barrier(1, ch=0, savepoint=True), blocked(0), phase(ALIGNING),
            timeout(1), blocked(0), phase(ALIGNING), persisting(),
            arrive(1, ch=1, savepoint=True, now=T1 + 10 * TIMEOUT_MS), phase(ALIGNING),
            poll(1, ch=1, savepoint=True), blocked(), phase(None),
        ],
        decisions=[trigger(1, savepoint=True)],
    ),
    Scenario(
        "a savepoint's barrier that has long been in flight still aligns",
        channels=2,
        steps=[arrive(1, ch=0, savepoint=True, now=T1 + 10 * TIMEOUT_MS), phase(ALIGNING)],
        decisions=[],
    ),
    Scenario(
        "late timeouts of completed, aborted, subsumed and switched checkpoints decide nothing",
        channels=2,
        steps=[
            # 1 completes aligned
            barrier(1, ch=0), barrier(1, ch=1), timeout(1),
            # 2 is cancelled
            barrier(2, ch=0), cancel(2, ch=1), blocked(), timeout(2),
            # 3 is subsumed by 4
            barrier(3, ch=0), arrive(4, ch=1), timeout(3), phase(ALIGNING), current(4),
            # 4 switches once, its second timeout changes nothing
            timeout(4), persisting(0), timeout(4), persisting(0),
            # a timeout for a checkpoint never seen
            timeout(9), current(4),
        ],
        decisions=[
            arm(1, TIMEOUT_MS), trigger(1),
            arm(2, TIMEOUT_MS), cancelled(2),
            arm(3, TIMEOUT_MS), subsumed(3), arm(4, TIMEOUT_MS),
            unaligned(4, {0, 1}), stop(1, 4),
        ],
    ),
    Scenario(
        "a timeout after the channel state completed decides nothing",
        channels=1,
        steps=[arrive(1, ch=0), timeout(1), poll(1, ch=0)],
        decisions=[arm(1, TIMEOUT_MS), unaligned(1, {0}), stop(0, 1), complete(1)],
    ),
    Scenario(
        "a barrier that arrives later than the timeout after its trigger switches at once",
        channels=2,
        steps=[arrive(1, ch=0, now=T1 + TIMEOUT_MS), phase(UNALIGNED), persisting(1)],
        decisions=[unaligned(1, {0, 1}), stop(0, 1)],
    ),
    Scenario(
        "a barrier in flight for part of the timeout arms the timer for the rest",
        channels=2,
        steps=[arrive(1, ch=0, now=T1 + 30)],
        decisions=[arm(1, TIMEOUT_MS - 30)],
    ),
    Scenario(
        "a task clock behind the coordinator's arms the whole timeout",
        channels=2,
        steps=[arrive(1, ch=0, now=T1 - 50)],
        decisions=[arm(1, TIMEOUT_MS)],
    ),
    Scenario(
        "a later barrier showing that the timeout passed switches",
        channels=3,
        steps=[
            arrive(1, ch=0, now=T1 + 10), poll(1, ch=0), blocked(0),
            arrive(1, ch=1, now=T1 + TIMEOUT_MS - 1), phase(ALIGNING),
            arrive(1, ch=2, now=T1 + TIMEOUT_MS + 40), phase(None), blocked(),
        ],
        decisions=[
            arm(1, TIMEOUT_MS - 10),
            unaligned(1, {1, 2}), stop(1, 1), stop(2, 1), complete(1),
        ],
    ),
    Scenario(
        "a newer barrier aborts the unaligned checkpoint and starts aligning",
        channels=2,
        steps=[
            barrier(1, ch=0), timeout(1), persisting(1),
            # channel 1 skipped checkpoint 1
            arrive(2, ch=1), phase(ALIGNING), current(2), persisting(), blocked(),
            poll(2, ch=1), blocked(1),
        ],
        decisions=[
            arm(1, TIMEOUT_MS), unaligned(1, {1}),
            subsumed(1), arm(2, TIMEOUT_MS),
        ],
    ),
    Scenario(
        "a newer barrier subsumes the alignment in progress and unblocks every channel",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(1, ch=1), blocked(0, 1),
            arrive(2, ch=2), blocked(), current(2),
            # channels 0 and 1 process what came after barrier 1 until barrier 2
            barrier(2, ch=0), barrier(2, ch=1), poll(2, ch=2),
        ],
        decisions=[arm(1, TIMEOUT_MS), subsumed(1), arm(2, TIMEOUT_MS), trigger(2)],
    ),
    Scenario(
        "a cancellation marker aborts the alignment and its timer then fires for nothing",
        channels=2,
        steps=[barrier(1, ch=0), cancel(1, ch=1), blocked(), phase(None), timeout(1)],
        decisions=[arm(1, TIMEOUT_MS), cancelled(1)],
    ),
    Scenario(
        "a cancellation marker aborts the checkpoint after the switch",
        channels=3,
        steps=[barrier(1, ch=0), timeout(1), cancel(1, ch=1), persisting(), phase(None)],
        decisions=[arm(1, TIMEOUT_MS), unaligned(1, {1, 2}), cancelled(1)],
    ),
    Scenario(
        "an end of partition completes an alignment waiting for it",
        channels=3,
        steps=[barrier(1, ch=0), barrier(1, ch=1), end(ch=2), blocked(), phase(None)],
        decisions=[arm(1, TIMEOUT_MS), trigger(1)],
    ),
    Scenario(
        "the last open channel ending aborts the alignment",
        channels=2,
        steps=[
            barrier(1, ch=0),
            # the task never polls a blocked channel; the handler stays consistent anyway
            end(ch=0), end(ch=1), open_channels(0), phase(None), timeout(1),
        ],
        decisions=[arm(1, TIMEOUT_MS), input_ended(1)],
    ),
    Scenario(
        "an end of partition after the switch stops persisting and may complete",
        channels=3,
        steps=[
            barrier(1, ch=0), timeout(1), persisting(1, 2),
            end(ch=1), persisting(2), end(ch=2), phase(None),
        ],
        decisions=[
            arm(1, TIMEOUT_MS), unaligned(1, {1, 2}),
            stop(1, 1), stop(2, 1), complete(1),
        ],
    ),
]  # fmt: skip


@pytest.mark.parametrize("scenario", [s.param() for s in SCENARIOS])
def test_the_alternating_handler_decides_what_the_scenario_says(scenario: Scenario) -> None:
    play(CheckpointBarrierUnaligner.alternating(scenario.channels, TIMEOUT_MS), scenario)


@pytest.mark.parametrize("timeout_ms", [0, -5])
def test_an_alternating_handler_needs_a_timeout_of_at_least_one_millisecond(
    timeout_ms: int,
) -> None:
    with pytest.raises(ValueError, match="aligned timeout"):
        CheckpointBarrierUnaligner.alternating(2, timeout_ms)


@pytest.mark.parametrize("timeout_ms", [1.5, "100", True])
def test_the_aligned_timeout_is_whole_milliseconds(timeout_ms: object) -> None:
    with pytest.raises(TypeError, match="whole milliseconds"):
        CheckpointBarrierUnaligner.alternating(2, timeout_ms)  # type: ignore[arg-type]


def test_the_switch_forwards_the_first_barrier_of_the_alignment() -> None:
    handler = CheckpointBarrierUnaligner.alternating(2, TIMEOUT_MS)
    first = CheckpointBarrier(1, timestamp=10)
    handler.on_barrier_announced(1, first)
    handler.on_barrier_announced(0, CheckpointBarrier(1, timestamp=11))
    (trigger_unaligned, *_rest) = handler.on_alignment_timeout(1)
    assert trigger_unaligned.barrier == first  # type: ignore[union-attr]


# ---- properties over random runs ---------------------------------------------------------------


@given(st.data())
def test_aligned_or_switched_the_snapshot_and_channel_state_hold_each_record_exactly_once(
    data: st.DataObject,
) -> None:
    streams, savepoints = data.draw(numbered_streams())
    handler = CheckpointBarrierUnaligner.alternating(len(streams), TIMEOUT_MS)
    task = run(data, handler, streams, with_clock=True)
    check_exactly_once(task, streams)
    for n in savepoints:
        outcome = task.outcomes.get(n)
        assert outcome is None or outcome.channel_state is None, (n, outcome)
    assert handler.current_checkpoint_id is None
    assert handler.blocked_channels == handler.persisting_channels == frozenset()


@given(st.data())
def test_checkpoints_are_decided_once_and_savepoints_never_switch(data: st.DataObject) -> None:
    streams, savepoints = data.draw(numbered_streams())
    handler = CheckpointBarrierUnaligner.alternating(len(streams), TIMEOUT_MS)
    task = run(data, handler, streams, with_clock=True)
    decided = [n for n, outcome in task.outcomes.items() if outcome.completed or outcome.aborted]
    assert decided == sorted(decided)
    for n, outcome in task.outcomes.items():
        if n in savepoints:
            assert outcome.unaligned_channels is None, (n, outcome)
