"""CheckpointBarrierAligner, event by event: the rules of Flink's aligned barrier handler."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scenario import (
    CANCELLED,
    INPUT_ENDED,
    SUBSUMED,
    Scenario,
    aligning,
    barrier,
    blocked,
    cancel,
    channel_streams,
    deliver,
    end,
    interleaving,
    latest,
    open_channels,
    play,
)

from barrierflow.runtime.barriers.aligner import CheckpointBarrierAligner
from barrierflow.runtime.barriers.decisions import TriggerCheckpoint
from barrierflow.runtime.elements import CheckpointBarrier

SCENARIOS = [
    Scenario(
        "a single channel triggers at every barrier",
        channels=1,
        steps=[
            barrier(1, ch=0), blocked(), aligning(None), latest(1),
            barrier(2, ch=0), blocked(), aligning(None), latest(2),
        ],
        decisions=[1, 2],
    ),
    Scenario(
        "a barrier blocks its channel until every channel delivered it",
        channels=3,
        steps=[
            barrier(1, ch=0), blocked(0), aligning(1),
            barrier(1, ch=2), blocked(0, 2), aligning(1),
            # the last channel completes the alignment: trigger and unblock everything
            barrier(1, ch=1), blocked(), aligning(None), latest(1),
        ],
        decisions=[1],
    ),
    Scenario(
        "alignments follow one another",
        channels=2,
        steps=[
            barrier(1, ch=1), barrier(1, ch=0), blocked(),
            barrier(2, ch=0), blocked(0), aligning(2),
            barrier(2, ch=1), blocked(),
        ],
        decisions=[1, 2],
    ),
    Scenario(
        "a newer barrier subsumes the alignment in progress",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(1, ch=1), blocked(0, 1),
            # checkpoint 2 overtakes 1: abort 1, unblock all, align 2 on channel 2 only
            barrier(2, ch=2), blocked(2), aligning(2),
            barrier(2, ch=0), blocked(0, 2),
            barrier(2, ch=1), blocked(),
        ],
        decisions=[-1, 2],
        aborts={1: SUBSUMED},
    ),
    Scenario(
        "each newer barrier subsumes the one before",
        channels=2,
        steps=[
            barrier(1, ch=0),
            barrier(2, ch=1), blocked(1),
            barrier(3, ch=0), blocked(0), aligning(3),
            barrier(3, ch=1), blocked(),
        ],
        decisions=[-1, -2, 3],
        aborts={1: SUBSUMED, 2: SUBSUMED},
    ),
    Scenario(
        "a newer barrier that completes its alignment at once triggers right after the abort",
        channels=2,
        steps=[
            barrier(1, ch=0),
            end(ch=0), open_channels(1), blocked(), aligning(1),
            # channel 1 is the only open one: its barrier 2 subsumes 1 and completes 2
            barrier(2, ch=1), blocked(), aligning(None),
        ],
        decisions=[-1, 2],
        aborts={1: SUBSUMED},
    ),
    Scenario(
        "late barriers of a subsumed checkpoint neither block nor trigger",
        channels=3,
        steps=[
            barrier(1, ch=0),
            barrier(2, ch=1), blocked(1),
            # channel 2 is late with checkpoint 1, which is gone
            barrier(1, ch=2), blocked(1), aligning(2), latest(2),
            barrier(2, ch=0), barrier(2, ch=2), blocked(),
        ],
        decisions=[-1, 2],
        aborts={1: SUBSUMED},
    ),
    Scenario(
        "late barriers of a cancelled checkpoint neither block nor trigger",
        channels=2,
        steps=[
            cancel(1, ch=0), blocked(), latest(1),
            barrier(1, ch=1), blocked(), aligning(None),
            barrier(2, ch=1), barrier(2, ch=0),
        ],
        decisions=[-1, 2],
        aborts={1: CANCELLED},
    ),
    Scenario(
        "a cancellation marker aborts the alignment in progress",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(1, ch=1), blocked(0, 1),
            cancel(1, ch=2), blocked(), aligning(None),
            # the next checkpoint aligns as usual
            barrier(2, ch=2), barrier(2, ch=1), blocked(1, 2),
            barrier(2, ch=0), blocked(),
        ],
        decisions=[-1, 2],
        aborts={1: CANCELLED},
    ),
    Scenario(
        "a cancellation marker of a newer checkpoint subsumes the alignment and is reported",
        channels=2,
        steps=[
            barrier(1, ch=0), blocked(0),
            cancel(2, ch=1), blocked(), aligning(None), latest(2),
            # barriers of the cancelled checkpoint are late
            barrier(2, ch=0), blocked(),
            barrier(3, ch=0), barrier(3, ch=1),
        ],
        decisions=[-1, -2, 3],
        aborts={1: SUBSUMED, 2: CANCELLED},
    ),
    Scenario(
        "a cancellation marker with no alignment in progress is reported at once",
        channels=2,
        steps=[cancel(1, ch=0), blocked(), aligning(None), barrier(1, ch=1), blocked()],
        decisions=[-1],
        aborts={1: CANCELLED},
    ),
    Scenario(
        "a repeated cancellation marker is reported once",
        channels=3,
        steps=[cancel(3, ch=0), cancel(3, ch=1), cancel(3, ch=2)],
        decisions=[-3],
        aborts={3: CANCELLED},
    ),
    Scenario(
        "an older cancellation marker decides nothing",
        channels=3,
        steps=[
            barrier(1, ch=0),
            barrier(2, ch=1), blocked(1),
            # checkpoint 1 is already subsumed; its marker changes nothing
            cancel(1, ch=2), blocked(1), aligning(2),
            barrier(2, ch=0), barrier(2, ch=2),
        ],
        decisions=[-1, 2],
        aborts={1: SUBSUMED},
    ),
    Scenario(
        "an ended channel is not waited for",
        channels=3,
        steps=[
            end(ch=2), open_channels(2), blocked(),
            barrier(1, ch=0), blocked(0),
            barrier(1, ch=1), blocked(),
        ],
        decisions=[1],
    ),
    Scenario(
        "an end of partition completes the alignment waiting for it",
        channels=3,
        steps=[
            barrier(1, ch=0), barrier(1, ch=1), blocked(0, 1),
            end(ch=2), blocked(), aligning(None),
        ],
        decisions=[1],
    ),
    Scenario(
        "an end of partition that leaves the alignment unfinished waits for the rest",
        channels=3,
        steps=[
            barrier(1, ch=0),
            end(ch=1), blocked(0), aligning(1),
            barrier(1, ch=2), blocked(),
        ],
        decisions=[1],
    ),
    Scenario(
        "the last open channel ending aborts the alignment",
        channels=2,
        steps=[
            barrier(1, ch=0),
            # the task never polls a blocked channel; the aligner stays consistent anyway
            end(ch=0), blocked(), aligning(1), open_channels(1),
            end(ch=1), open_channels(0), aligning(None),
        ],
        decisions=[-1],
        aborts={1: INPUT_ENDED},
    ),
    Scenario(
        "ends of partition with nothing to align decide nothing",
        channels=2,
        steps=[end(ch=0), end(ch=1), open_channels(0), blocked()],
        decisions=[],
    ),
]  # fmt: skip


@pytest.mark.parametrize("scenario", [s.param() for s in SCENARIOS])
def test_the_aligner_decides_what_the_scenario_says(scenario: Scenario) -> None:
    play(CheckpointBarrierAligner(scenario.channels), scenario)


def test_a_new_aligner_blocks_nothing_and_has_seen_nothing() -> None:
    aligner = CheckpointBarrierAligner(3)
    assert [aligner.is_blocked(c) for c in range(3)] == [False, False, False]
    assert aligner.blocked_channels == frozenset()
    assert aligner.current_checkpoint_id is None
    assert aligner.latest_checkpoint_id is None
    assert aligner.open_channel_count == 3


def test_the_trigger_forwards_the_first_barrier_of_the_alignment() -> None:
    aligner = CheckpointBarrierAligner(2)
    first = CheckpointBarrier(1, timestamp=10)
    assert aligner.on_barrier(0, first) == ()
    assert aligner.on_barrier(1, CheckpointBarrier(1, timestamp=11)) == (TriggerCheckpoint(first),)


# ---- properties over random interleavings ------------------------------------------------------


@given(st.data())
def test_the_aligner_triggers_once_per_id_in_increasing_order_after_every_open_channel(
    data: st.DataObject,
) -> None:
    streams = data.draw(channel_streams())
    aligner = CheckpointBarrierAligner(len(streams))
    delivered: list[set[int]] = [set() for _ in streams]
    ended = [False] * len(streams)
    decided: list[int] = []
    triggered: list[int] = []
    positions = [0] * len(streams)
    for channel in data.draw(interleaving(streams)):
        element = streams[channel][positions[channel]]
        positions[channel] += 1
        decisions = deliver(aligner, channel, element)
        if element[0] == "barrier":
            delivered[channel].add(element[1])
        ended[channel] = element[0] == "end"
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


@given(st.data())
def test_with_blocked_channels_left_unpolled_no_record_after_a_barrier_precedes_its_snapshot(
    data: st.DataObject,
) -> None:
    streams = data.draw(channel_streams(records=True, always_end=True))
    aligner = CheckpointBarrierAligner(len(streams))
    last: list[tuple[str, int] | None] = [None] * len(streams)
    positions = [0] * len(streams)
    while any(positions[c] < len(s) for c, s in enumerate(streams)):
        ready = [
            c for c, s in enumerate(streams) if positions[c] < len(s) and not aligner.is_blocked(c)
        ]
        assert ready, "every channel with input left is blocked: the alignment is stuck"
        channel = data.draw(st.sampled_from(ready))
        element = last[channel] = streams[channel][positions[channel]]
        positions[channel] += 1
        if element[0] == "record":
            continue
        for decision in deliver(aligner, channel, element):
            if isinstance(decision, TriggerCheckpoint):
                n = decision.checkpoint_id
                for c, previous in enumerate(last):
                    assert previous in {("barrier", n), ("end", 0)}, (c, previous, n)
    assert aligner.blocked_channels == frozenset()
    assert aligner.current_checkpoint_id is None
