"""CheckpointBarrierTracker, event by event: the rules of Flink's at-least-once barrier tracker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import (
    CANCELLED,
    INPUT_ENDED,
    SUBSUMED,
    Scenario,
    barrier,
    blocked,
    cancel,
    channel_streams,
    deliver,
    end,
    interleaving,
    open_channels,
    pending,
    play,
)

from barrierflow.runtime.barriers.decisions import TriggerCheckpoint
from barrierflow.runtime.barriers.tracker import MAX_CHECKPOINTS_TO_TRACK, CheckpointBarrierTracker
from barrierflow.runtime.elements import CheckpointBarrier

SCENARIOS = [
    Scenario(
        "a single channel triggers at every barrier",
        channels=1,
        steps=[barrier(1, ch=0), pending(), barrier(2, ch=0), pending(), blocked()],
        decisions=[1, 2],
    ),
    Scenario(
        "a barrier triggers once every channel delivered it and never blocks",
        channels=3,
        steps=[
            barrier(1, ch=0), blocked(), pending(1),
            barrier(1, ch=2), blocked(), pending(1),
            barrier(1, ch=1), blocked(), pending(),
        ],
        decisions=[1],
    ),
    Scenario(
        "several checkpoints are pending at once",
        channels=2,
        steps=[
            barrier(1, ch=0), barrier(2, ch=0), barrier(3, ch=0), pending(1, 2, 3),
            barrier(1, ch=1), pending(2, 3),
            barrier(2, ch=1), pending(3),
            barrier(3, ch=1), pending(),
        ],
        decisions=[1, 2, 3],
    ),
    Scenario(
        "a completed checkpoint silently drops the older pending ones",
        channels=2,
        steps=[
            barrier(1, ch=0), barrier(2, ch=0), pending(1, 2),
            # channel 1 skipped checkpoint 1, so 1 can never complete
            barrier(2, ch=1), pending(),
        ],
        decisions=[2],
    ),
    Scenario(
        "the barrier of a checkpoint overtaken before it was pending is ignored",
        channels=2,
        steps=[
            barrier(2, ch=0), pending(2),
            # channel 0 skipped 1, so 1 cannot complete: it does not become pending
            barrier(1, ch=1), pending(2),
            barrier(2, ch=1), pending(),
        ],
        decisions=[2],
    ),
    Scenario(
        "a cancellation marker of a pending checkpoint aborts it, its later barriers are ignored",
        channels=3,
        steps=[
            barrier(1, ch=0), pending(1),
            cancel(1, ch=1), pending(),
            barrier(1, ch=2), pending(),
        ],
        decisions=[-1],
        aborts={1: CANCELLED},
    ),
    Scenario(
        "a cancellation marker of a newer checkpoint is reported and its barriers ignored",
        channels=2,
        steps=[
            cancel(1, ch=0), pending(),
            barrier(1, ch=1), pending(),
            barrier(2, ch=0), barrier(2, ch=1),
        ],
        decisions=[-1, 2],
        aborts={1: CANCELLED},
    ),
    Scenario(
        "a cancellation marker aborts the older pending checkpoints as subsumed",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(2, ch=0), barrier(2, ch=1), barrier(3, ch=0),
            pending(1, 2, 3),
            # channel 2 skipped 1 and cancels 2: neither can complete; 3 still can
            cancel(2, ch=2), pending(3),
            barrier(3, ch=1), barrier(3, ch=2),
        ],
        decisions=[-1, -2, 3],
        aborts={1: SUBSUMED, 2: CANCELLED},
    ),
    Scenario(
        "a cancellation marker newer than everything aborts every pending checkpoint",
        channels=2,
        steps=[
            barrier(1, ch=0), barrier(2, ch=0), pending(1, 2),
            cancel(3, ch=1), pending(),
        ],
        decisions=[-1, -2, -3],
        aborts={1: SUBSUMED, 2: SUBSUMED, 3: CANCELLED},
    ),
    Scenario(
        "a repeated cancellation marker is reported once",
        channels=3,
        steps=[cancel(3, ch=0), cancel(3, ch=1), cancel(3, ch=2), pending()],
        decisions=[-3],
        aborts={3: CANCELLED},
    ),
    Scenario(
        "the cancellation marker of a checkpoint that cannot complete here decides nothing",
        channels=2,
        steps=[
            barrier(2, ch=0), pending(2),
            cancel(1, ch=1), pending(2),
            barrier(2, ch=1),
        ],
        decisions=[2],
    ),
    Scenario(
        "an ended channel is not waited for",
        channels=3,
        steps=[
            end(ch=2), open_channels(2),
            barrier(1, ch=0), pending(1),
            barrier(1, ch=1), pending(),
        ],
        decisions=[1],
    ),
    Scenario(
        "a channel that delivered a barrier and then ended is no longer counted",
        channels=3,
        steps=[
            barrier(1, ch=0),
            end(ch=0), open_channels(2),
            barrier(1, ch=1), pending(1),
            barrier(1, ch=2), pending(),
        ],
        decisions=[1],
    ),
    Scenario(
        "an end of partition triggers the pending checkpoints it completes, oldest first",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(1, ch=1),
            barrier(2, ch=0), barrier(2, ch=1), pending(1, 2),
            end(ch=2), pending(),
        ],
        decisions=[1, 2],
    ),
    Scenario(
        "an end of partition triggers the newer complete checkpoint over an incomplete older one",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(1, ch=1),
            barrier(2, ch=0),
            barrier(3, ch=0), barrier(3, ch=1), pending(1, 2, 3),
            # 1 and 3 complete without channel 2; 3 drops 2 silently
            end(ch=2), pending(),
        ],
        decisions=[1, 3],
    ),
    Scenario(
        "an end of partition leaves the incomplete checkpoints pending",
        channels=3,
        steps=[barrier(1, ch=0), end(ch=1), pending(1), barrier(1, ch=2), pending()],
        decisions=[1],
    ),
    Scenario(
        "the last open channel ending aborts the pending checkpoints",
        channels=2,
        steps=[
            barrier(1, ch=0), barrier(2, ch=0),
            end(ch=0), pending(1, 2),
            end(ch=1), open_channels(0), pending(),
        ],
        decisions=[-1, -2],
        aborts={1: INPUT_ENDED, 2: INPUT_ENDED},
    ),
    Scenario(
        "ends of partition with nothing pending decide nothing",
        channels=2,
        steps=[end(ch=0), end(ch=1), open_channels(0)],
        decisions=[],
    ),
    Scenario(
        f"no more than {MAX_CHECKPOINTS_TO_TRACK} checkpoints are pending, the oldest is dropped",
        channels=2,
        steps=[
            *(barrier(n, ch=0) for n in range(1, MAX_CHECKPOINTS_TO_TRACK + 2)),
            pending(*range(2, MAX_CHECKPOINTS_TO_TRACK + 2)),
            barrier(1, ch=1), pending(*range(2, MAX_CHECKPOINTS_TO_TRACK + 2)),
            barrier(2, ch=1),
        ],
        decisions=[2],
    ),
]  # fmt: skip


@pytest.mark.parametrize("scenario", [s.param() for s in SCENARIOS])
def test_the_tracker_decides_what_the_scenario_says(scenario: Scenario) -> None:
    play(CheckpointBarrierTracker(scenario.channels), scenario)


def test_a_new_tracker_blocks_nothing_and_has_nothing_pending() -> None:
    tracker = CheckpointBarrierTracker(3)
    assert [tracker.is_blocked(c) for c in range(3)] == [False, False, False]
    assert tracker.pending_checkpoint_ids == ()
    assert tracker.open_channel_count == 3


def test_the_trigger_forwards_the_first_barrier_of_the_checkpoint() -> None:
    tracker = CheckpointBarrierTracker(2)
    first = CheckpointBarrier(1, timestamp=10)
    assert tracker.on_barrier(0, first) == ()
    assert tracker.on_barrier(1, CheckpointBarrier(1, timestamp=11)) == (TriggerCheckpoint(first),)


# ---- properties over random interleavings ------------------------------------------------------


@given(st.data())
def test_the_tracker_never_blocks_and_triggers_in_increasing_order_after_every_open_channel(
    data: st.DataObject,
) -> None:
    streams = data.draw(channel_streams())
    tracker = CheckpointBarrierTracker(len(streams))
    delivered: list[set[int]] = [set() for _ in streams]
    ended = [False] * len(streams)
    decided: list[int] = []
    triggered: list[int] = []
    positions = [0] * len(streams)
    for channel in data.draw(interleaving(streams)):
        element = streams[channel][positions[channel]]
        positions[channel] += 1
        decisions = deliver(tracker, channel, element)
        if element[0] == "barrier":
            delivered[channel].add(element[1])
        ended[channel] = element[0] == "end"
        assert not any(tracker.is_blocked(c) for c in range(len(streams)))
        for decision in decisions:
            decided.append(decision.checkpoint_id)
            if isinstance(decision, TriggerCheckpoint):
                triggered.append(decision.checkpoint_id)
                for c in range(len(streams)):
                    assert ended[c] or decision.checkpoint_id in delivered[c], (c, decision)
    # strictly increasing decisions: no id triggered twice, or triggered and aborted
    assert decided == sorted(set(decided))
    assert triggered == sorted(set(triggered))
    newest = max((n for stream in streams for _, n in stream), default=0)
    if all(("barrier", newest) in stream for stream in streams):
        assert triggered[-1:] == [newest]
