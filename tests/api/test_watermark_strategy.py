"""WatermarkStrategy and the built-in generators, call by call."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pyspark import cloudpickle
from support.clocks import ManualClock

from barrierflow.core.time import Duration
from barrierflow.core.watermark_strategy import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    RecordTimestampAssigner,
    TimestampAssigner,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
    WatermarksWithIdleness,
)
from barrierflow.runtime.elements import Watermark

W = Watermark


class RecordingOutput(WatermarkOutput):
    """Collects what a generator emits: watermarks, "idle" and "active", in order."""

    def __init__(self) -> None:
        self.emitted: list[Watermark | str] = []

    def emit_watermark(self, watermark: Watermark) -> None:
        self.emitted.append(watermark)

    def mark_idle(self) -> None:
        self.emitted.append("idle")

    def mark_active(self) -> None:
        self.emitted.append("active")

    def pop_all(self) -> list[Watermark | str]:
        emitted, self.emitted = self.emitted, []
        return emitted


class CountingGenerator(WatermarkGenerator):
    """Emits, on every periodic call, how many events it has seen so far."""

    def __init__(self) -> None:
        self.events = 0

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self.events += 1

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self.events))


class FieldTimestamps(TimestampAssigner):
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return value["ts"]


# --- BoundedOutOfOrdernessWatermarks -------------------------------------------------


def test_bounded_out_of_orderness_emits_nothing_before_the_first_event():
    generator, output = BoundedOutOfOrdernessWatermarks(Duration.of_millis(10)), RecordingOutput()
    generator.on_periodic_emit(output)
    assert output.pop_all() == []


def test_bounded_out_of_orderness_trails_the_greatest_timestamp_by_the_bound_plus_one():
    generator, output = BoundedOutOfOrdernessWatermarks(Duration.of_millis(10)), RecordingOutput()
    generator.on_event("a", 100, output)
    assert output.pop_all() == []  # periodic only: nothing on events
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(89)]
    generator.on_event("late", 95, output)  # an older timestamp does not lower it
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(89)]  # the same watermark again, every period
    generator.on_event("b", 130, output)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(119)]


def test_bounded_out_of_orderness_accepts_milliseconds_and_refuses_other_types():
    generator, output = BoundedOutOfOrdernessWatermarks(5), RecordingOutput()
    generator.on_event("a", 100, output)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(94)]
    with pytest.raises(TypeError):
        BoundedOutOfOrdernessWatermarks(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="negative"):
        BoundedOutOfOrdernessWatermarks(-1)


def test_ascending_timestamps_trail_the_latest_by_one_millisecond():
    generator, output = AscendingTimestampsWatermarks(), RecordingOutput()
    generator.on_periodic_emit(output)
    generator.on_event("a", 100, output)
    generator.on_event("b", 250, output)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(249)]


def test_no_watermarks_emits_nothing_ever():
    generator, output = NoWatermarksGenerator(), RecordingOutput()
    for timestamp in (1, 100, 10_000):
        generator.on_event("a", timestamp, output)
        generator.on_periodic_emit(output)
    assert output.pop_all() == []


# --- WatermarksWithIdleness ----------------------------------------------------------


def with_idleness(timeout: int = 1_000) -> tuple[WatermarksWithIdleness, ManualClock]:
    clock = ManualClock()
    return WatermarksWithIdleness(AscendingTimestampsWatermarks(), timeout, clock), clock


def test_a_generator_that_never_sees_an_event_goes_idle_after_the_timeout():
    generator, clock = with_idleness()
    output = RecordingOutput()
    clock.advance(999)
    generator.on_periodic_emit(output)
    assert output.pop_all() == []
    clock.advance(1)
    generator.on_periodic_emit(output)
    assert output.pop_all() == ["idle"]
    assert generator.is_idle


def test_idleness_counts_from_when_the_generator_was_created():
    clock = ManualClock(now=10_000)
    generator = WatermarksWithIdleness(NoWatermarksGenerator(), 1_000, clock)
    output = RecordingOutput()
    clock.advance(999)
    generator.on_periodic_emit(output)
    assert output.pop_all() == []
    clock.advance(1)
    generator.on_periodic_emit(output)
    assert output.pop_all() == ["idle"]


def test_idleness_counts_from_the_last_periodic_emit_that_had_seen_an_event():
    generator, clock = with_idleness()
    output = RecordingOutput()
    generator.on_event("a", 100, output)
    clock.advance(500)  # t=500: the event is seen here
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(99)]
    clock.advance(999)  # t=1499: quiet for 999 ms since 500
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(99)]
    clock.advance(1)  # t=1500: quiet for the whole timeout
    generator.on_periodic_emit(output)
    assert output.pop_all() == ["idle"]


def test_an_event_between_periodic_emits_keeps_the_generator_active():
    generator, clock = with_idleness()
    output = RecordingOutput()
    for timestamp in (100, 200, 300):
        clock.advance(900)
        generator.on_event("a", timestamp, output)
        generator.on_periodic_emit(output)
    assert output.pop_all() == [W(99), W(199), W(299)]


def test_an_idle_generator_marks_idle_once_and_stops_emitting_watermarks():
    generator, clock = with_idleness()
    output = RecordingOutput()
    generator.on_event("a", 100, output)
    generator.on_periodic_emit(output)
    clock.advance(1_000)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(99), "idle"]
    clock.advance(5_000)
    generator.on_periodic_emit(output)
    generator.on_periodic_emit(output)
    assert output.pop_all() == []


def test_the_next_event_marks_an_idle_generator_active_before_anything_else():
    clock = ManualClock()
    output = RecordingOutput()

    class Punctuated(WatermarkGenerator):
        def on_event(self, event, event_timestamp, output):
            output.emit_watermark(Watermark(event_timestamp))

        def on_periodic_emit(self, output):
            pass

    generator = WatermarksWithIdleness(Punctuated(), Duration.of_seconds(1), clock)
    clock.advance(1_000)
    generator.on_periodic_emit(output)
    assert output.pop_all() == ["idle"]
    generator.on_event("a", 700, output)
    assert output.pop_all() == ["active", W(700)]
    assert not generator.is_idle
    generator.on_event("b", 800, output)  # already active: no second "active"
    assert output.pop_all() == [W(800)]


def test_after_coming_back_the_generator_emits_again_and_can_go_idle_again():
    generator, clock = with_idleness()
    output = RecordingOutput()
    clock.advance(1_000)
    generator.on_periodic_emit(output)
    generator.on_event("a", 5_000, output)
    clock.advance(100)  # t=1100
    generator.on_periodic_emit(output)
    assert output.pop_all() == ["idle", "active", W(4_999)]
    clock.advance(1_000)  # t=2100: quiet since 1100
    generator.on_periodic_emit(output)
    assert output.pop_all() == ["idle"]


def test_the_idle_timeout_must_be_positive():
    for bad in (0, Duration(0)):
        with pytest.raises(ValueError, match="positive"):
            WatermarksWithIdleness(NoWatermarksGenerator(), bad, ManualClock())


# --- WatermarkStrategy ---------------------------------------------------------------


def test_no_watermarks_keeps_kind_none_for_the_environment_check():
    strategy = WatermarkStrategy.no_watermarks()
    assert strategy.kind == "none"
    assert strategy.is_no_watermarks
    for other in (
        WatermarkStrategy.for_monotonous_timestamps(),
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)),
        WatermarkStrategy.for_generator(CountingGenerator),
    ):
        assert other.kind != "none"
        assert not other.is_no_watermarks


@pytest.mark.parametrize(
    ("strategy", "generator_type"),
    [
        (WatermarkStrategy.no_watermarks(), NoWatermarksGenerator),
        (WatermarkStrategy.for_monotonous_timestamps(), AscendingTimestampsWatermarks),
        (
            WatermarkStrategy.for_bounded_out_of_orderness(Duration(5)),
            BoundedOutOfOrdernessWatermarks,
        ),
        (WatermarkStrategy.for_generator(CountingGenerator), CountingGenerator),
    ],
    ids=["no_watermarks", "monotonous", "bounded", "generator"],
)
def test_each_strategy_creates_its_generator(strategy, generator_type):
    assert type(strategy.create_watermark_generator()) is generator_type


def test_the_bounded_strategy_passes_its_bound_to_the_generator():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
    assert strategy.max_out_of_orderness == Duration(5_000)
    generator, output = strategy.create_watermark_generator(), RecordingOutput()
    generator.on_event("a", 10_000, output)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(4_999)]
    assert WatermarkStrategy.for_bounded_out_of_orderness(250).max_out_of_orderness == Duration(250)


def test_every_split_gets_a_fresh_generator_from_the_supplier():
    strategy = WatermarkStrategy.for_generator(CountingGenerator)
    first, second = strategy.create_watermark_generator(), strategy.create_watermark_generator()
    assert first is not second
    output = RecordingOutput()
    first.on_event("a", 1, output)
    second.on_periodic_emit(output)
    assert output.pop_all() == [W(0)]


def test_for_generator_refuses_what_does_not_make_generators():
    with pytest.raises(TypeError, match="callable"):
        WatermarkStrategy.for_generator(CountingGenerator())  # type: ignore[arg-type]
    strategy = WatermarkStrategy.for_generator(lambda: "not a generator")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="WatermarkGenerator"):
        strategy.create_watermark_generator()

    class EventsOnly:
        def on_event(self, event, event_timestamp, output):
            pass

    with pytest.raises(TypeError, match="on_periodic_emit"):
        WatermarkStrategy.for_generator(EventsOnly).create_watermark_generator()


def test_a_generator_by_duck_typing_is_accepted():
    class Duck:
        def on_event(self, event, event_timestamp, output):
            pass

        def on_periodic_emit(self, output):
            output.emit_watermark(Watermark(7))

    generator = WatermarkStrategy.for_generator(Duck).create_watermark_generator()
    output = RecordingOutput()
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(7)]


def test_with_idleness_wraps_the_generator_and_uses_the_given_clock():
    clock = ManualClock()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_seconds(2))
    generator = strategy.create_watermark_generator(clock)
    assert isinstance(generator, WatermarksWithIdleness)
    output = RecordingOutput()
    generator.on_event("a", 10, output)
    generator.on_periodic_emit(output)
    clock.advance(1_999)
    generator.on_periodic_emit(output)
    clock.advance(1)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(9), W(9), "idle"]


def test_with_idleness_wraps_a_user_generator_too():
    strategy = WatermarkStrategy.for_generator(CountingGenerator).with_idleness(1_000)
    assert strategy.idleness == Duration(1_000)
    assert isinstance(strategy.create_watermark_generator(ManualClock()), WatermarksWithIdleness)


def test_with_idleness_refuses_a_timeout_that_is_not_positive():
    with pytest.raises(ValueError, match="positive"):
        WatermarkStrategy.no_watermarks().with_idleness(Duration(0))
    with pytest.raises(TypeError):
        WatermarkStrategy.no_watermarks().with_idleness("5s")  # type: ignore[arg-type]


def test_the_default_timestamp_assigner_keeps_the_record_timestamp():
    assigner = WatermarkStrategy.for_monotonous_timestamps().create_timestamp_assigner()
    assert isinstance(assigner, RecordTimestampAssigner)
    assert assigner.extract_timestamp({"ts": 5}, 1_234) == 1_234


def test_a_timestamp_assigner_object_is_used_as_is():
    assigner = FieldTimestamps()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(assigner)
    assert strategy.create_timestamp_assigner() is assigner
    assert strategy.create_timestamp_assigner().extract_timestamp({"ts": 5}, 1_234) == 5


def test_a_plain_callable_works_as_a_timestamp_assigner():
    strategy = WatermarkStrategy.no_watermarks().with_timestamp_assigner(
        lambda value, record_timestamp: value * 10 + record_timestamp
    )
    assigner = strategy.create_timestamp_assigner()
    assert isinstance(assigner, TimestampAssigner)
    assert assigner.extract_timestamp(4, 2) == 42


def test_with_timestamp_assigner_refuses_what_cannot_assign():
    with pytest.raises(TypeError, match="TimestampAssigner"):
        WatermarkStrategy.no_watermarks().with_timestamp_assigner(42)  # type: ignore[arg-type]


def test_with_methods_return_new_strategies_and_keep_the_rest():
    base = WatermarkStrategy.for_bounded_out_of_orderness(Duration(100))
    assigner = FieldTimestamps()
    configured = base.with_timestamp_assigner(assigner).with_idleness(Duration(500))
    assert base.timestamp_assigner is None and base.idleness is None
    assert configured.kind == "bounded"
    assert configured.max_out_of_orderness == Duration(100)
    assert configured.timestamp_assigner is assigner
    assert configured.idleness == Duration(500)


def test_strategies_built_alike_are_equal():
    def by_field(value, record_timestamp):
        return value["ts"]

    assert WatermarkStrategy.for_bounded_out_of_orderness(Duration(5)).with_timestamp_assigner(
        by_field
    ) == WatermarkStrategy.for_bounded_out_of_orderness(5).with_timestamp_assigner(by_field)


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown"):
        WatermarkStrategy("sometimes")
    with pytest.raises(ValueError, match="generator_supplier"):
        WatermarkStrategy("generator")


def test_a_strategy_with_lambdas_survives_cloudpickle_as_shipped_to_spark():
    strategy = (
        WatermarkStrategy.for_generator(lambda: CountingGenerator())
        .with_timestamp_assigner(lambda value, record_timestamp: value + 1)
        .with_idleness(Duration.of_seconds(1))
    )
    shipped = pickle.loads(cloudpickle.dumps(strategy))
    assert shipped.kind == "generator" and shipped.idleness == Duration(1_000)
    assert shipped.create_timestamp_assigner().extract_timestamp(41, 0) == 42
    clock = ManualClock()
    generator, output = shipped.create_watermark_generator(clock), RecordingOutput()
    generator.on_event("a", 1, output)
    generator.on_periodic_emit(output)
    assert output.pop_all() == [W(1)]


def test_a_strategy_of_module_level_parts_survives_plain_pickle():
    strategy = (
        WatermarkStrategy.for_bounded_out_of_orderness(Duration(10))
        .with_timestamp_assigner(FieldTimestamps())
        .with_idleness(Duration(100))
    )
    copy = pickle.loads(pickle.dumps(strategy))
    assert copy.kind == strategy.kind and copy.idleness == strategy.idleness
    assert copy.max_out_of_orderness == strategy.max_out_of_orderness
    assert copy.create_timestamp_assigner().extract_timestamp({"ts": 3}, 0) == 3
