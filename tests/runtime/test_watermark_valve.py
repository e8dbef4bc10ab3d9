"""StatusWatermarkValve, event by event.

Every case of Flink's StatusWatermarkValveTest is ported as a scenario table: each step
feeds one input and lists exactly what the valve must emit for it, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.outputs import RecordingOutput

from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.watermarks import MIN_WATERMARK, StatusWatermarkValve

IDLE = StreamStatus.IDLE
ACTIVE = StreamStatus.ACTIVE


@dataclass(frozen=True)
class Step:
    """One input to the valve and everything it must emit in answer."""

    input: Watermark | StreamStatus
    channel: int
    expected: tuple[Watermark | StreamStatus, ...]

    def __str__(self) -> str:
        what = f"wm({self.input.timestamp})" if isinstance(self.input, Watermark) else self.input
        return f"{what} on ch={self.channel}"


def wm(timestamp: int, ch: int, *expected: Watermark | StreamStatus) -> Step:
    return Step(Watermark(timestamp), ch, expected)


def idle(ch: int, *expected: Watermark | StreamStatus) -> Step:
    return Step(IDLE, ch, expected)


def active(ch: int, *expected: Watermark | StreamStatus) -> Step:
    return Step(ACTIVE, ch, expected)


W = Watermark


def play(valve: StatusWatermarkValve, output: RecordingOutput, steps: list[Step]) -> None:
    """Feed the steps one by one; after each, the valve emitted exactly what it expects."""
    for number, step in enumerate(steps, 1):
        if isinstance(step.input, Watermark):
            valve.input_watermark(step.input, step.channel)
        else:
            valve.input_stream_status(step.input, step.channel)
        emitted = output.pop_all()
        assert emitted == list(step.expected), f"step {number} ({step}) emitted {emitted}"


def valve_of(num_channels: int) -> tuple[StatusWatermarkValve, RecordingOutput]:
    output = RecordingOutput()
    return StatusWatermarkValve(num_channels, output), output


# --- One channel ---------------------------------------------------------------------


def test_a_single_channel_forwards_every_increasing_watermark():
    # Flink: testSingleInputIncreasingWatermarks
    valve, output = valve_of(1)
    play(valve, output, [wm(0, 0, W(0)), wm(25, 0, W(25))])


def test_a_single_channel_ignores_a_watermark_that_goes_back():
    # Flink: testSingleInputDecreasingWatermarksYieldsNoOutput
    valve, output = valve_of(1)
    play(valve, output, [wm(25, 0, W(25)), wm(18, 0), wm(42, 0, W(42))])


def test_a_single_channel_forwards_only_status_changes():
    # Flink: testSingleInputWatermarkStatusToggling
    valve, output = valve_of(1)
    play(
        valve,
        output,
        [
            active(0),  # channels start ACTIVE: no change, no output
            idle(0, IDLE),
            idle(0),
            active(0, ACTIVE),
        ],
    )


def test_an_idle_channel_keeps_its_watermark_and_ignores_new_ones():
    # Flink: testSingleInputWatermarksIntactDuringIdleness
    valve, output = valve_of(1)
    play(valve, output, [wm(25, 0, W(25)), idle(0, IDLE), wm(50, 0)])
    assert valve.channel_status(0).watermark == 25
    play(valve, output, [active(0, ACTIVE), wm(50, 0, W(50))])


# --- Several channels ----------------------------------------------------------------


def test_the_valve_emits_nothing_until_every_channel_has_a_watermark():
    # Flink: testMultipleInputYieldsWatermarkOnlyWhenAllChannelsReceivesWatermarks
    valve, output = valve_of(3)
    play(valve, output, [wm(0, 0), wm(0, 1), wm(0, 2, W(0))])


def test_the_output_follows_the_minimum_as_it_advances():
    # Flink: testMultipleInputIncreasingWatermarks
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(0, 0),
            wm(0, 1),
            wm(0, 2, W(0)),
            wm(12, 0),
            wm(8, 2),
            wm(10, 2),
            wm(15, 1, W(10)),  # minimum is channel 2 at 10
            wm(17, 2, W(12)),  # minimum is channel 0 at 12
            wm(20, 0, W(15)),  # minimum is channel 1 at 15
        ],
    )


def test_watermarks_that_go_back_on_several_channels_are_ignored():
    # Flink: testMultipleInputDecreasingWatermarksYieldsNoOutput
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [wm(25, 0), wm(10, 1), wm(17, 2, W(10)), wm(12, 0), wm(8, 1), wm(15, 2)],
    )


def test_the_valve_is_idle_only_when_every_channel_is_idle():
    # Flink: testMultipleInputWatermarkStatusToggling
    valve, output = valve_of(2)
    play(
        valve,
        output,
        [
            active(0),  # channels start ACTIVE
            active(1),
            idle(1),
            idle(0, IDLE),  # now every channel is idle
            idle(0),
            idle(1),
            active(1, ACTIVE),  # the first channel back makes the valve active
            active(0),  # already active
        ],
    )


def test_idle_channel_does_not_hold_back_the_watermark():
    # Flink: testMultipleInputWatermarkAdvancingWithPartiallyIdleChannels
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(15, 0),
            wm(10, 1),
            idle(2, W(10)),  # minimum over the channels still active
            wm(18, 1, W(15)),
            wm(20, 0, W(18)),
        ],
    )


def test_the_watermark_advances_as_channels_go_idle_one_by_one():
    # Flink: testMultipleInputWatermarkAdvancingAsChannelsIndividuallyBecomeIdle
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(25, 0),
            wm(10, 1),
            wm(17, 2, W(10)),
            idle(1, W(17)),  # channels 0 and 2 remain: 17 is the minimum
            idle(2, W(25)),  # channel 0 remains
        ],
    )


def test_when_every_channel_goes_idle_the_maximum_is_flushed_before_idle():
    # Flink: testMultipleInputFlushMaxWatermarkAndWatermarkStatusOnceAllInputsBecomeIdle
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(10, 0),
            wm(5, 1),
            wm(3, 2, W(3)),
            idle(0),  # 10 was not the minimum: nothing to emit
            idle(1),  # 5 was not the minimum: nothing to emit
            idle(2, W(10), IDLE),
        ],
    )


def test_a_channel_back_from_idle_counts_again_only_once_it_has_caught_up():
    # Flink: testMultipleInputWatermarkRealignmentAfterResumeActive
    valve, output = valve_of(3)
    play(valve, output, [wm(10, 0), wm(7, 1), wm(3, 2, W(3)), idle(2, W(7)), active(2)])
    assert not valve.channel_status(2).is_aligned  # 3 is behind the output, 7
    play(valve, output, [wm(5, 2)])  # accepted, but it does not count yet
    assert valve.channel_status(2).watermark == 5
    play(valve, output, [wm(9, 2)])  # caught up: realigned
    assert valve.channel_status(2).is_aligned
    play(valve, output, [wm(12, 1, W(9))])  # channel 2 now holds the minimum


def test_nothing_is_emitted_when_no_active_channel_is_aligned():
    # Flink: testNoOutputWhenAllActiveChannelsAreUnaligned (an earlier Flink valve emitted
    # Long.MAX_VALUE here)
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(10, 0),
            wm(7, 1),
            idle(2, W(7)),
            active(2),  # back, but at MIN_WATERMARK: unaligned
            idle(0),
            idle(1),  # channel 2 is the only active one, and it is unaligned
        ],
    )


# --- Beyond Flink's test class -------------------------------------------------------


def test_channels_start_active_and_aligned_at_the_minimum_watermark():
    valve, _ = valve_of(2)
    for index in range(2):
        status = valve.channel_status(index)
        assert (status.watermark, status.status, status.is_aligned) == (
            MIN_WATERMARK,
            ACTIVE,
            True,
        )
    assert valve.last_output_watermark == MIN_WATERMARK
    assert not valve.is_idle


def test_last_output_watermark_and_is_idle_follow_what_was_emitted():
    valve, output = valve_of(2)
    play(valve, output, [wm(4, 0), wm(6, 1, W(4))])
    assert (valve.last_output_watermark, valve.is_idle) == (4, False)
    play(valve, output, [idle(0, W(6)), idle(1, IDLE)])
    assert (valve.last_output_watermark, valve.is_idle) == (6, True)
    play(valve, output, [active(0, ACTIVE)])
    assert (valve.last_output_watermark, valve.is_idle) == (6, False)


def test_a_watermark_equal_to_the_channels_current_one_is_ignored():
    valve, output = valve_of(1)
    play(valve, output, [wm(5, 0, W(5)), wm(5, 0)])


def test_a_channel_back_from_idle_ahead_of_the_output_is_aligned_at_once():
    valve, output = valve_of(2)
    play(valve, output, [wm(10, 0), wm(20, 1, W(10)), idle(1), active(1)])
    assert valve.channel_status(1).is_aligned
    play(valve, output, [wm(30, 0, W(20))])  # channel 1 holds it back at 20 again


def test_a_channel_back_from_idle_that_has_not_caught_up_does_not_hold_back_the_watermark():
    valve, output = valve_of(2)
    play(valve, output, [wm(10, 0), wm(5, 1, W(5)), idle(1, W(10)), active(1)])
    play(valve, output, [wm(8, 1), wm(12, 0, W(12))])  # 8 < 10: channel 1 still unaligned


def test_the_flush_does_not_depend_on_which_channel_goes_idle_last():
    # Deliberate deviation from Flink, which flushes only when the last channel to go
    # idle sits exactly at the last output watermark. Here that channel (2) is still
    # catching up at 10 while idle channel 1 is at 20, so Flink would go IDLE at 15 and
    # never flush 20; the flush is meant to be independent of the order (Flink's own
    # test comment), so 20 comes out before IDLE.
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(10, 0),
            wm(20, 1),
            wm(10, 2, W(10)),
            idle(2),
            wm(15, 0, W(15)),
            active(2),  # 10 < 15: unaligned
            idle(1),  # 20 is not the minimum: nothing
            idle(0),  # no aligned channel remains: nothing
            idle(2, W(20), IDLE),
        ],
    )


def test_no_flush_when_the_maximum_was_already_emitted():
    valve, output = valve_of(2)
    play(valve, output, [wm(3, 0), wm(9, 1, W(3)), idle(0, W(9)), idle(1, IDLE)])


def test_a_watermark_on_an_idle_channel_does_not_count_when_it_comes_back():
    valve, output = valve_of(2)
    play(valve, output, [wm(5, 0), wm(5, 1, W(5)), idle(1), wm(50, 1), wm(7, 0, W(7))])
    play(valve, output, [active(1)])  # channel 1 is at 5, not 50: unaligned
    assert valve.channel_status(1).watermark == 5
    assert not valve.channel_status(1).is_aligned


def test_the_max_watermark_at_end_of_input_passes_once_every_channel_sent_it():
    max_watermark = 2**63 - 1
    valve, output = valve_of(2)
    play(valve, output, [wm(max_watermark, 0), wm(max_watermark, 1, W(max_watermark))])


@pytest.mark.parametrize("bad_index", [-1, 2])
def test_a_channel_index_out_of_range_is_an_error(bad_index):
    valve, _ = valve_of(2)
    with pytest.raises(IndexError, match="out of range"):
        valve.input_watermark(Watermark(1), bad_index)
    with pytest.raises(IndexError, match="out of range"):
        valve.input_stream_status(IDLE, bad_index)


def test_a_valve_needs_a_channel():
    with pytest.raises(ValueError, match="at least one channel"):
        StatusWatermarkValve(0, RecordingOutput())


# --- Properties ----------------------------------------------------------------------

NUM_CHANNELS = 3

inputs = st.lists(
    st.one_of(
        st.tuples(st.integers(-5, 40).map(Watermark), st.integers(0, NUM_CHANNELS - 1)),
        st.tuples(st.sampled_from([IDLE, ACTIVE]), st.integers(0, NUM_CHANNELS - 1)),
    ),
    max_size=60,
)


@given(inputs)
def test_whatever_the_inputs_the_output_is_well_formed(steps):
    valve, output = valve_of(NUM_CHANNELS)
    max_received = MIN_WATERMARK
    last_watermark = MIN_WATERMARK
    statuses: list[StreamStatus] = []
    for element, channel in steps:
        if isinstance(element, Watermark):
            max_received = max(max_received, element.timestamp)
            valve.input_watermark(element, channel)
        else:
            valve.input_stream_status(element, channel)
        for emitted in output.pop_all():
            if isinstance(emitted, Watermark):
                assert emitted.timestamp > last_watermark, "watermarks strictly increase"
                assert emitted.timestamp <= max_received, "never beyond what was received"
                assert not statuses or statuses[-1] is ACTIVE, "no watermark while idle"
                last_watermark = emitted.timestamp
            else:
                expected = IDLE if not statuses or statuses[-1] is ACTIVE else ACTIVE
                assert emitted is expected, "IDLE and ACTIVE alternate, starting with IDLE"
                statuses.append(emitted)
        assert valve.last_output_watermark == last_watermark
        assert valve.is_idle == (bool(statuses) and statuses[-1] is IDLE)


def test_a_channel_back_ahead_of_the_output_moves_it_only_with_its_next_watermark():
    # As in Flink, a status change alone never advances the watermark: channel 1 comes
    # back aligned at 20 while the output is 12, and the output moves at its next watermark.
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(10, 0),
            wm(10, 1),
            wm(10, 2, W(10)),
            idle(2),
            wm(12, 0),
            wm(20, 1, W(12)),
            active(2),  # 10 < 12: unaligned
            idle(1),  # 20 is not the minimum: nothing
            idle(0),  # no aligned channel remains: nothing
            active(1),  # 20 >= 12: aligned, but nothing is emitted yet
            wm(20, 1),  # not greater than channel 1's watermark: ignored
            wm(21, 1, W(21)),
        ],
    )


def test_a_channel_going_idle_off_the_minimum_does_not_recompute_it():
    # As in Flink, a channel going idle recomputes the minimum only if its watermark is
    # the last output one. Channel 2 (unaligned, at 10) goes idle while the output is 12:
    # channel 1's pending 20 still waits for channel 1's next watermark.
    valve, output = valve_of(3)
    play(
        valve,
        output,
        [
            wm(10, 0),
            wm(10, 1),
            wm(10, 2, W(10)),
            idle(2),
            wm(12, 0),
            wm(20, 1, W(12)),
            active(2),  # 10 < 12: unaligned
            idle(1),
            idle(0),
            active(1),  # 20 >= 12: aligned, nothing emitted yet
            idle(2),  # 10 is not the last output watermark: nothing
            wm(21, 1, W(21)),
        ],
    )


def test_a_channel_that_catches_up_exactly_to_the_output_counts_again():
    valve, output = valve_of(2)
    play(valve, output, [wm(10, 0), wm(5, 1, W(5)), idle(1, W(10)), active(1)])
    play(valve, output, [wm(10, 1)])  # equal to the output: realigned, nothing new
    assert valve.channel_status(1).is_aligned
    play(valve, output, [wm(20, 0), wm(15, 1, W(15))])  # channel 1 held it back at 10
