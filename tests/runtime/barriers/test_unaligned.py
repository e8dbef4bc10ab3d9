"""CheckpointBarrierUnaligner.unaligned, event by event: Flink's unaligned checkpoints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import blocked, cancel, end, latest, open_channels
from scenario_unaligned import (
    Scenario,
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
    raises,
    run,
    stop,
    subsumed,
    timeout,
    trigger,
    unaligned,
)

from barrierflow.runtime.barriers.decisions import TriggerCheckpoint, TriggerUnaligned
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner, Phase
from barrierflow.runtime.elements import CancelCheckpointMarker, CheckpointBarrier

ALIGNING, UNALIGNED = Phase.ALIGNING, Phase.UNALIGNED

SCENARIOS = [
    Scenario(
        "the first barrier to arrive triggers at once, over every open channel",
        channels=3,
        steps=[
            arrive(1, ch=1), phase(UNALIGNED), current(1), latest(1),
            # nothing is blocked: the task keeps polling what was queued before the barrier
            blocked(), persisting(0, 2),
        ],
        decisions=[unaligned(1, {0, 1, 2}), stop(1, 1)],
    ),
    Scenario(
        "each channel persists until its own barrier arrives, then the state is complete",
        channels=3,
        steps=[
            arrive(1, ch=0), persisting(1, 2),
            arrive(1, ch=2), persisting(1),
            arrive(1, ch=1), persisting(), phase(None), current(None), latest(1),
        ],
        decisions=[
            unaligned(1, {0, 1, 2}), stop(0, 1),
            stop(2, 1),
            stop(1, 1), complete(1),
        ],
    ),
    Scenario(
        "polling the barriers later decides nothing, before or after completion",
        channels=2,
        steps=[
            arrive(1, ch=0), poll(1, ch=0), blocked(), persisting(1),
            arrive(1, ch=1), poll(1, ch=1), blocked(),
        ],
        decisions=[unaligned(1, {0, 1}), stop(0, 1), stop(1, 1), complete(1)],
    ),
    Scenario(
        "a single channel triggers and completes at its barrier",
        channels=1,
        steps=[
            arrive(1, ch=0), phase(None), poll(1, ch=0),
            barrier(2, ch=0), phase(None),
        ],
        decisions=[
            unaligned(1, {0}), stop(0, 1), complete(1),
            unaligned(2, {0}), stop(0, 2), complete(2),
        ],
    ),
    Scenario(
        "checkpoints follow one another",
        channels=2,
        steps=[
            barrier(1, ch=1), barrier(1, ch=0),
            barrier(2, ch=0), persisting(1), barrier(2, ch=1), persisting(),
        ],
        decisions=[
            unaligned(1, {0, 1}), stop(1, 1), stop(0, 1), complete(1),
            unaligned(2, {0, 1}), stop(0, 2), stop(1, 2), complete(2),
        ],
    ),
    Scenario(
        "a newer barrier aborts the unfinished checkpoint as subsumed and starts its own",
        channels=3,
        steps=[
            arrive(1, ch=0), arrive(1, ch=1), persisting(2),
            # channel 2 skipped checkpoint 1: 1 can never complete
            arrive(2, ch=2), current(2), persisting(0, 1),
            arrive(2, ch=0), arrive(2, ch=1), persisting(), phase(None),
        ],
        decisions=[
            unaligned(1, {0, 1, 2}), stop(0, 1), stop(1, 1),
            subsumed(1), unaligned(2, {0, 1, 2}), stop(2, 2),
            stop(0, 2), stop(1, 2), complete(2),
        ],
    ),
    Scenario(
        "late barriers of a subsumed checkpoint decide nothing",
        channels=3,
        steps=[
            arrive(1, ch=0),
            arrive(2, ch=1), persisting(0, 2),
            # channel 2 is late with checkpoint 1, which is gone
            arrive(1, ch=2), poll(1, ch=2), persisting(0, 2), current(2), latest(2),
            poll(1, ch=0), arrive(2, ch=0), arrive(2, ch=2),
        ],
        decisions=[
            unaligned(1, {0, 1, 2}), stop(0, 1),
            subsumed(1), unaligned(2, {0, 1, 2}), stop(1, 2),
            stop(0, 2), stop(2, 2), complete(2),
        ],
    ),
    Scenario(
        "a cancellation marker aborts the checkpoint being persisted",
        channels=3,
        steps=[
            arrive(1, ch=0), persisting(1, 2),
            cancel(1, ch=1), persisting(), phase(None),
            # barriers of the cancelled checkpoint are late
            arrive(1, ch=2), persisting(),
            arrive(2, ch=2),
        ],
        decisions=[
            unaligned(1, {0, 1, 2}), stop(0, 1),
            cancelled(1),
            unaligned(2, {0, 1, 2}), stop(2, 2),
        ],
    ),
    Scenario(
        "a cancellation marker of a newer checkpoint subsumes the current one and is reported",
        channels=2,
        steps=[
            arrive(1, ch=0),
            cancel(2, ch=1), persisting(), phase(None), latest(2),
            arrive(2, ch=0), phase(None),
        ],
        decisions=[unaligned(1, {0, 1}), stop(0, 1), subsumed(1), cancelled(2)],
    ),
    Scenario(
        "a cancellation marker with nothing pending is reported once",
        channels=2,
        steps=[cancel(3, ch=0), cancel(3, ch=1), latest(3), arrive(3, ch=0), phase(None)],
        decisions=[cancelled(3)],
    ),
    Scenario(
        "an end of partition stops persisting its channel and may complete the checkpoint",
        channels=3,
        steps=[
            arrive(1, ch=0), persisting(1, 2),
            end(ch=1), persisting(2), open_channels(2),
            end(ch=2), persisting(), phase(None),
        ],
        decisions=[unaligned(1, {0, 1, 2}), stop(0, 1), stop(1, 1), stop(2, 1), complete(1)],
    ),
    Scenario(
        "an end of partition of a channel that already delivered the barrier decides nothing",
        channels=2,
        steps=[
            arrive(1, ch=0), poll(1, ch=0),
            end(ch=0), persisting(1), open_channels(1),
            arrive(1, ch=1),
        ],
        decisions=[unaligned(1, {0, 1}), stop(0, 1), stop(1, 1), complete(1)],
    ),
    Scenario(
        "the last open channel ending completes the checkpoint instead of aborting it",
        channels=2,
        steps=[
            arrive(1, ch=0), poll(1, ch=0), end(ch=0),
            end(ch=1), open_channels(0), phase(None),
        ],
        decisions=[unaligned(1, {0, 1}), stop(0, 1), stop(1, 1), complete(1)],
    ),
    Scenario(
        "an ended channel has no part in later checkpoints",
        channels=3,
        steps=[end(ch=2), arrive(1, ch=0), persisting(1), arrive(1, ch=1)],
        decisions=[unaligned(1, {0, 1}), stop(0, 1), stop(1, 1), complete(1)],
    ),
    Scenario(
        "ends of partition with nothing pending decide nothing",
        channels=2,
        steps=[end(ch=0), end(ch=1), open_channels(0), persisting()],
        decisions=[],
    ),
    Scenario(
        "a savepoint aligns even though checkpoints are unaligned",
        channels=2,
        steps=[
            arrive(1, ch=0, savepoint=True), phase(ALIGNING), blocked(), persisting(),
            poll(1, ch=0, savepoint=True), blocked(0),
            timeout(1), blocked(0), phase(ALIGNING),
            arrive(1, ch=1, savepoint=True), blocked(0),
            poll(1, ch=1, savepoint=True), blocked(), phase(None),
            # the next checkpoint is unaligned again
            arrive(2, ch=1),
        ],
        decisions=[trigger(1, savepoint=True), unaligned(2, {0, 1}), stop(1, 2)],
    ),
    Scenario(
        "a checkpoint barrier arriving during a savepoint's alignment subsumes it",
        channels=2,
        steps=[
            barrier(1, ch=0, savepoint=True), blocked(0),
            arrive(2, ch=1), blocked(), phase(UNALIGNED), persisting(0),
        ],
        decisions=[subsumed(1), unaligned(2, {0, 1}), stop(1, 2)],
    ),
    Scenario(
        "an end of partition completes a savepoint's alignment waiting for it",
        channels=2,
        steps=[barrier(1, ch=0, savepoint=True), blocked(0), end(ch=1), blocked(), phase(None)],
        decisions=[trigger(1, savepoint=True)],
    ),
    Scenario(
        "the last open channel ending aborts a savepoint's alignment",
        channels=2,
        steps=[
            barrier(1, ch=0, savepoint=True),
            # the task never polls a blocked channel; the handler stays consistent anyway
            end(ch=0), blocked(), phase(ALIGNING),
            end(ch=1), phase(None), open_channels(0),
        ],
        decisions=[input_ended(1)],
    ),
    Scenario(
        "a barrier polled before it arrived is corruption",
        channels=2,
        steps=[raises(poll(1, ch=0), "channel 0 .*checkpoint 1 in-band before it arrived")],
        decisions=[],
    ),
    Scenario(
        "a barrier polled out of its arrival order is corruption",
        channels=2,
        steps=[
            arrive(1, ch=0), arrive(2, ch=0),
            raises(poll(2, ch=0), "checkpoint 2 in-band while the barrier of checkpoint 1"),
        ],
        decisions=[unaligned(1, {0, 1}), stop(0, 1), subsumed(1), unaligned(2, {0, 1}), stop(0, 2)],
    ),
    Scenario(
        "an end of partition polled ahead of a barrier that arrived before it is corruption",
        channels=2,
        steps=[arrive(1, ch=1), raises(end(ch=1), "channel 1 ended before .*checkpoint 1")],
        decisions=[unaligned(1, {0, 1}), stop(1, 1)],
    ),
    Scenario(
        "a barrier polled after the end of its channel is corruption",
        channels=2,
        # (announced barriers, markers and ends after an end: test_channel_ledger.py)
        steps=[end(ch=0), raises(poll(1, ch=0), "channel 0 .*checkpoint 1 after it ended")],
        decisions=[],
    ),
]  # fmt: skip


@pytest.mark.parametrize("scenario", [s.param() for s in SCENARIOS])
def test_the_unaligner_decides_what_the_scenario_says(scenario: Scenario) -> None:
    play(CheckpointBarrierUnaligner.unaligned(scenario.channels), scenario)


def test_a_new_unaligner_blocks_nothing_persists_nothing_and_has_seen_nothing() -> None:
    handler = CheckpointBarrierUnaligner.unaligned(3)
    assert [handler.is_blocked(c) for c in range(3)] == [False, False, False]
    assert [handler.is_persisting(c) for c in range(3)] == [False, False, False]
    assert handler.blocked_channels == handler.persisting_channels == frozenset()
    assert handler.current_checkpoint_id is None and handler.current_phase is None
    assert handler.latest_checkpoint_id is None
    assert handler.open_channel_count == 3
    assert handler.aligned_timeout_ms == 0


def test_the_trigger_forwards_the_first_barrier_to_arrive() -> None:
    handler = CheckpointBarrierUnaligner.unaligned(2)
    first = CheckpointBarrier(1, timestamp=10)
    decisions = handler.on_barrier_announced(1, first)
    assert decisions[0] == TriggerUnaligned(first, frozenset({0, 1}))
    assert (
        handler.on_barrier_announced(0, CheckpointBarrier(1, timestamp=11))[-1].checkpoint_id == 1
    )


def test_the_alignment_timeout_of_an_unaligner_decides_nothing() -> None:
    handler = CheckpointBarrierUnaligner.unaligned(2)
    handler.on_barrier_announced(0, CheckpointBarrier(1, 0))
    assert handler.on_alignment_timeout(1) == ()
    assert handler.persisting_channels == frozenset({1})


# ---- properties over random runs ---------------------------------------------------------------


@given(st.data())
def test_the_snapshot_and_channel_state_hold_each_record_before_the_barrier_exactly_once(
    data: st.DataObject,
) -> None:
    streams, savepoints = data.draw(numbered_streams())
    task = run(data, CheckpointBarrierUnaligner.unaligned(len(streams)), streams)
    check_exactly_once(task, streams)
    for n, outcome in task.outcomes.items():
        if outcome.completed:
            # checkpoints are unaligned, savepoints aligned
            assert (outcome.channel_state is None) == (n in savepoints), (n, outcome)
    assert task.handler.current_checkpoint_id is None
    assert task.handler.blocked_channels == task.handler.persisting_channels == frozenset()


@given(st.data())
def test_every_checkpoint_is_decided_at_most_once_in_increasing_order(data: st.DataObject) -> None:
    streams, _ = data.draw(numbered_streams())
    task = run(data, CheckpointBarrierUnaligner.unaligned(len(streams)), streams)
    decided = [n for n, outcome in task.outcomes.items() if outcome.completed or outcome.aborted]
    assert decided == sorted(decided)
    newest = max(
        (e.checkpoint_id for s in streams for e in s if isinstance(e, CheckpointBarrier)), default=0
    )
    # a cancellation of it or of a later checkpoint aborts it (Flink's rule), whatever came
    cancelled = max(
        (e.checkpoint_id for s in streams for e in s if isinstance(e, CancelCheckpointMarker)),
        default=0,
    )
    if (
        newest
        and cancelled < newest
        and all(
            any(isinstance(e, CheckpointBarrier) and e.checkpoint_id == newest for e in s)
            for s in streams
        )
    ):
        assert task.outcomes[newest].completed


def test_a_final_checkpoint_is_aligned_like_a_savepoint():
    # The tasks finish when the final checkpoint completes: nothing may stay in flight.
    final = CheckpointBarrier(4, 100, is_final=True)
    for handler in (
        CheckpointBarrierUnaligner.unaligned(2),
        CheckpointBarrierUnaligner.alternating(2, 10),
    ):
        assert handler.on_barrier_announced(0, final, now_ms=10_000) == ()
        assert handler.on_alignment_timeout(4) == ()
        assert handler.persisting_channels == frozenset()
        assert handler.on_barrier(0, final) == ()
        assert handler.is_blocked(0)
        assert handler.on_barrier_announced(1, final, now_ms=10_000) == ()
        assert handler.on_barrier(1, final) == (TriggerCheckpoint(final),)
