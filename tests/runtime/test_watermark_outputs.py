"""SplitWatermarkMultiplexer, event by event: feed one input, assert exactly what came out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.clocks import ManualClock
from support.outputs import RecordingOutput

from barrierflow.core.time import Duration
from barrierflow.core.watermark_strategy import (
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
)
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.watermark_outputs import SplitWatermarkMultiplexer
from barrierflow.runtime.watermarks import MIN_WATERMARK

IDLE = StreamStatus.IDLE
ACTIVE = StreamStatus.ACTIVE
W = Watermark


class ScriptedGenerator(WatermarkGenerator):
    """A punctuated generator steered by its records.

    A record "idle" or "active" marks the split so; any other record emits its
    timestamp as a watermark. `on_periodic_emit` emits whatever `periodic` holds.
    """

    def __init__(self) -> None:
        self.periodic: list[Watermark | str] = []
        self.output: WatermarkOutput | None = None
        """The output it was last given."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self.output = output
        if event == "idle":
            output.mark_idle()
        elif event == "active":
            output.mark_active()
        else:
            output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        self.output = output
        for action in self.periodic:
            if action == "idle":
                output.mark_idle()
            elif action == "active":
                output.mark_active()
            else:
                assert isinstance(action, Watermark)
                output.emit_watermark(action)
        self.periodic = []


def scripted() -> tuple[SplitWatermarkMultiplexer, RecordingOutput, list[ScriptedGenerator]]:
    """A multiplexer of ScriptedGenerators; the list holds them in registration order."""
    output = RecordingOutput()
    generators: list[ScriptedGenerator] = []

    def create() -> ScriptedGenerator:
        generators.append(ScriptedGenerator())
        return generators[-1]

    return SplitWatermarkMultiplexer(create, output), output, generators


Step = tuple[Callable[[SplitWatermarkMultiplexer], None], list[Watermark | StreamStatus]]


def register(split: str) -> Callable[[SplitWatermarkMultiplexer], None]:
    return lambda m: m.register_split(split)


def event(split: str, timestamp: int, record: Any = "record") -> Callable:
    return lambda m: m.on_event(split, record, timestamp)


def idle(split: str) -> Callable:
    return lambda m: m.on_event(split, "idle", 0)


def active(split: str) -> Callable:
    return lambda m: m.on_event(split, "active", 0)


def finish(split: str) -> Callable:
    return lambda m: m.finish_split(split)


def periodic() -> Callable:
    return lambda m: m.on_periodic_emit()


def play(multiplexer, output, steps: list[Step]) -> None:
    """Run the steps one by one; after each, exactly the expected elements came out."""
    for number, (action, expected) in enumerate(steps, 1):
        action(multiplexer)
        emitted = output.pop_all()
        assert emitted == expected, f"step {number} emitted {emitted}, expected {expected}"


# --- Combining splits ----------------------------------------------------------------


def test_nothing_is_emitted_until_every_split_has_a_watermark():
    m, out, _ = scripted()
    play(m, out, [(register("a"), []), (register("b"), []), (event("a", 10), [])])
    play(m, out, [(event("b", 20), [W(10)])])


def test_the_source_watermark_is_the_minimum_over_its_splits():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 10), []),
            (event("b", 20), [W(10)]),
            (event("a", 15), [W(15)]),
            (event("a", 30), [W(20)]),  # b now holds it back at 20
            (event("b", 25), [W(25)]),
        ],
    )


def test_a_watermark_is_emitted_only_when_the_minimum_grows():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 10), []),
            (event("b", 10), [W(10)]),
            (event("b", 12), []),  # a still at 10
            (event("a", 5), []),  # a's watermark does not go back
            (event("a", 10), []),  # nor does it grow
            (event("a", 30), [W(12)]),
            (event("a", 5), []),  # a stays at 30
            (event("b", 20), [W(20)]),
        ],
    )
    assert m.last_output_watermark == 20


def test_no_split_means_nothing_is_emitted():
    m, out, _ = scripted()
    play(m, out, [(periodic(), [])])
    assert m.last_output_watermark == MIN_WATERMARK
    assert not m.is_idle


def test_a_new_split_holds_back_the_watermark_until_it_catches_up():
    m, out, _ = scripted()
    play(m, out, [(register("a"), []), (event("a", 10), [W(10)]), (register("b"), [])])
    play(m, out, [(event("a", 20), []), (event("b", 5), []), (event("b", 15), [W(15)])])


# --- Idleness ------------------------------------------------------------------------


def test_an_idle_split_does_not_hold_back_the_watermark():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 10), []),
            (idle("b"), [W(10)]),
            (event("a", 20), [W(20)]),
        ],
    )


def test_the_source_is_idle_only_when_every_split_is_idle():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (idle("a"), []),
            (idle("b"), [IDLE]),
            (idle("b"), []),  # already idle
            (periodic(), []),  # still idle: no second IDLE
            (active("a"), [ACTIVE]),  # one split back is enough
            (active("b"), []),
        ],
    )
    assert not m.is_idle


def test_the_source_goes_idle_without_flushing_the_greater_watermarks():
    # As in Flink's multiplexer: the downstream valve does the flushing.
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 10), []),
            (event("b", 20), [W(10)]),
            (idle("b"), []),
            (idle("a"), [IDLE]),
        ],
    )
    assert m.is_idle and m.last_output_watermark == 10


def test_a_watermark_from_an_idle_split_makes_it_active_again():
    m, out, _ = scripted()
    play(m, out, [(register("a"), []), (event("a", 10), [W(10)]), (idle("a"), [IDLE])])
    play(m, out, [(event("a", 20), [ACTIVE, W(20)])])
    play(m, out, [(idle("a"), [IDLE]), (event("a", 20), [ACTIVE])])  # even one not greater


def test_a_split_back_from_idle_behind_does_not_move_the_watermark_back():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 30), []),
            (event("b", 5), [W(5)]),
            (idle("b"), [W(30)]),
            (active("b"), []),  # b at 5 holds back again, but 30 stays emitted
            (event("a", 40), []),
            (event("b", 35), [W(35)]),
        ],
    )


# --- Finishing -----------------------------------------------------------------------


def test_a_finished_split_no_longer_holds_back_the_watermark():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 30), []),
            (event("b", 5), [W(5)]),
            (finish("b"), [W(30)]),
        ],
    )
    assert m.live_splits == ["a"]


def test_when_every_split_has_finished_the_watermark_becomes_max():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (finish("a"), []),  # b (no watermark yet) holds it back
            (finish("b"), [W(MAX_WATERMARK)]),
            (periodic(), []),
        ],
    )


def test_an_idle_source_becomes_active_before_its_final_max_watermark():
    m, out, _ = scripted()
    play(
        m,
        out,
        [(register("a"), []), (idle("a"), [IDLE]), (finish("a"), [ACTIVE, W(MAX_WATERMARK)])],
    )


def test_when_the_last_active_split_finishes_the_idle_rest_makes_the_source_idle():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (register("b"), []),
            (idle("a"), []),
            (event("b", 10), [W(10)]),
            (finish("b"), [IDLE]),
        ],
    )


def test_what_a_finished_splits_generator_still_emits_is_ignored():
    m, out, generators = scripted()
    play(m, out, [(register("a"), []), (register("b"), []), (event("a", 10), [])])
    play(m, out, [(event("b", 5), [W(5)]), (finish("b"), [W(10)])])
    stale = generators[1]
    stale.periodic = [W(99)]
    play(m, out, [(periodic(), [])])  # b's generator is no longer called
    assert stale.periodic == [W(99)]
    assert stale.output is not None
    stale.output.mark_idle()  # a generator that kept its output and still uses it
    stale.output.emit_watermark(W(500))
    stale.output.mark_active()
    assert out.pop_all() == []


# --- Periodic emission ---------------------------------------------------------------


def test_periodic_emits_of_all_splits_are_combined_into_one_watermark():
    m, out, generators = scripted()
    play(m, out, [(register("a"), []), (register("b"), []), (event("a", 5), [])])
    play(m, out, [(event("b", 50), [W(5)])])
    a, b = generators
    # Combined after each call, a's 10 would come out before its 30.
    a.periodic = [W(10), W(30)]
    play(m, out, [(periodic(), [W(30)])])
    # Combined after each call, a going idle would release b's 50 before IDLE.
    a.periodic = ["idle"]
    b.periodic = ["idle"]
    play(m, out, [(periodic(), [IDLE])])
    a.periodic = ["active"]
    play(m, out, [(periodic(), [ACTIVE])])
    assert m.last_output_watermark == 30


def test_bounded_out_of_orderness_splits_emit_their_minimum_every_tick():
    output = RecordingOutput()
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
    m = SplitWatermarkMultiplexer(strategy.create_watermark_generator, output)
    play(
        m,
        output,
        [
            (register("a"), []),
            (register("b"), []),
            (periodic(), []),  # no event yet: nothing
            (event("a", 1_000), []),  # bounded generators emit only periodically
            (periodic(), []),  # b has seen nothing: it holds the source back
            (event("b", 3_000), []),
            (periodic(), [W(899)]),
            (periodic(), []),  # same watermarks again: nothing new
            (event("a", 5_000), []),
            (periodic(), [W(2_899)]),
        ],
    )


def test_a_quiet_split_goes_idle_after_the_timeout_and_comes_back_with_its_next_event():
    clock = ManualClock()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_seconds(1))
    output = RecordingOutput()
    m = SplitWatermarkMultiplexer(lambda: strategy.create_watermark_generator(clock), output)

    def tick(millis: int) -> Callable:
        def advance_and_emit(multiplexer: SplitWatermarkMultiplexer) -> None:
            clock.advance(millis)
            multiplexer.on_periodic_emit()

        return advance_and_emit

    play(
        m,
        output,
        [
            (register("a"), []),
            (register("b"), []),
            (event("a", 100), []),
            (tick(200), []),  # t=200: b (never an event) still holds the source back
            (event("a", 300), []),
            (tick(700), []),  # t=900: b quiet for 900 ms
            (tick(100), [W(299)]),  # t=1000: b idle; a, quiet since 900, counts
            (tick(500), []),  # t=1500: a quiet for 600 ms
            (tick(400), [IDLE]),  # t=1900: a idle too (quiet since 900)
            (event("b", 2_000), [ACTIVE]),  # b back, not emitted a watermark yet
            (tick(100), [W(1_999)]),
        ],
    )


# --- Misuse --------------------------------------------------------------------------


# --- Splits read in turn ---------------------------------------------------------------


def waiting(split: str) -> Callable[[SplitWatermarkMultiplexer], None]:
    return lambda m: m.register_split(split, waiting=True)


def test_splits_read_in_turn_hold_the_watermark_back_only_once_begun():
    """A reader of files in turn: the next file does not hold the watermark back before
    its first record, the gap between two files neither idles nor ends the source, and a
    file never begun still keeps MAX_WATERMARK for the end. A finishing file's generator
    emits once more, which counts (a file read in one batch had no periodic emit)."""
    m, out, generators = scripted()
    play(
        m,
        out,
        [
            (waiting("a"), []),
            (waiting("b"), []),
            (waiting("c"), []),
            (event("a", 10), [W(10)]),  # b and c not begun: a alone decides
            (event("a", 20), [W(20)]),
            (periodic(), []),
            (finish("a"), []),  # between files: hold, neither IDLE nor MAX
            (periodic(), []),
            (event("b", 35), [W(35)]),
        ],
    )
    generators[1].periodic = [W(40)]
    play(m, out, [(finish("b"), [W(40)]), (finish("c"), [W(MAX_WATERMARK)])])  # c had nothing


def test_a_split_begun_behind_holds_the_watermark_back_from_then_on():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (waiting("b"), []),
            (event("a", 10), [W(10)]),
            (event("b", 5), []),  # begun behind: never back, but it holds from now on
            (event("a", 20), []),
            (event("b", 15), [W(15)]),
            (event("b", 30), [W(20)]),
        ],
    )


def test_a_waiting_split_keeps_the_source_active_when_the_others_idle():
    m, out, _ = scripted()
    play(
        m,
        out,
        [
            (register("a"), []),
            (waiting("b"), []),
            (event("a", 10), [W(10)]),
            (idle("a"), []),  # b will be read next: the source is not idle
            (event("b", 20), [W(20)]),
            (idle("b"), [IDLE]),
        ],
    )


def test_a_split_cannot_be_registered_twice():
    m, _, _ = scripted()
    m.register_split("a")
    with pytest.raises(ValueError, match="already registered"):
        m.register_split("a")
    m.register_split("b")
    m.finish_split("a")
    with pytest.raises(ValueError, match="already registered"):
        m.register_split("a")


def test_an_unknown_or_finished_split_cannot_be_read_or_finished():
    m, _, _ = scripted()
    m.register_split("a")
    m.register_split("b")
    with pytest.raises(KeyError, match="is not registered"):
        m.on_event("c", "record", 1)
    with pytest.raises(KeyError, match="is not registered"):
        m.finish_split("c")
    m.finish_split("a")
    with pytest.raises(KeyError, match="has finished"):
        m.on_event("a", "record", 1)
    with pytest.raises(KeyError, match="has finished"):
        m.finish_split("a")


def test_no_split_can_be_registered_once_the_source_emitted_max():
    m, _, _ = scripted()
    m.register_split("a")
    m.finish_split("a")
    with pytest.raises(ValueError, match="MAX_WATERMARK"):
        m.register_split("b")


# --- Properties ----------------------------------------------------------------------

SPLITS = ["a", "b", "c"]

actions = st.lists(
    st.one_of(
        st.tuples(st.just("event"), st.sampled_from(SPLITS), st.integers(0, 50)),
        st.tuples(st.just("idle"), st.sampled_from(SPLITS), st.just(0)),
        st.tuples(st.just("active"), st.sampled_from(SPLITS), st.just(0)),
        st.tuples(st.just("finish"), st.sampled_from(SPLITS), st.just(0)),
    ),
    max_size=40,
)


@given(actions)
def test_whatever_the_splits_do_the_output_is_well_formed(steps):
    m, out, _ = scripted()
    for split in SPLITS:
        m.register_split(split)
    max_received = MIN_WATERMARK
    last_watermark = MIN_WATERMARK
    statuses: list[StreamStatus] = []
    for kind, split, timestamp in steps:
        if split not in m.live_splits:
            continue
        if kind == "event":
            max_received = max(max_received, timestamp)
            m.on_event(split, "record", timestamp)
        elif kind == "finish":
            m.finish_split(split)
        else:
            m.on_event(split, kind, 0)
        for emitted in out.pop_all():
            if isinstance(emitted, Watermark):
                assert emitted.timestamp > last_watermark
                if m.live_splits:
                    assert emitted.timestamp <= max_received
                assert not statuses or statuses[-1] is ACTIVE, "no watermark while idle"
                last_watermark = emitted.timestamp
            else:
                expected = IDLE if not statuses or statuses[-1] is ACTIVE else ACTIVE
                assert emitted is expected
                statuses.append(emitted)
    assert (last_watermark == MAX_WATERMARK) == (not m.live_splits)


def test_an_unbounded_source_with_every_split_finished_is_idle_until_a_new_split_comes():
    """Splits that keep coming (a monitored folder, issue 13): all finished is not the end."""
    output = RecordingOutput()
    multiplexer = SplitWatermarkMultiplexer(ScriptedGenerator, output, bounded=False)
    multiplexer.register_split("a")
    multiplexer.on_event("a", "record", 100)
    assert output.pop_all() == [W(100)]
    multiplexer.finish_split("a")
    assert output.pop_all() == [IDLE]
    multiplexer.register_split("b")
    assert output.pop_all() == [ACTIVE]
    multiplexer.on_event("b", "record", 50)  # behind the source's watermark: nothing
    multiplexer.on_event("b", "record", 150)
    assert output.pop_all() == [W(150)]


def test_registering_a_split_while_every_split_is_idle_makes_the_source_active():
    multiplexer, output, _ = scripted()
    multiplexer.register_split("a")
    multiplexer.on_event("a", "idle", 0)
    assert output.pop_all() == [IDLE]
    multiplexer.register_split("b")
    assert output.pop_all() == [ACTIVE]
