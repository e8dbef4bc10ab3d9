"""`Time` (PyFlink's pyflink.common.Time) wherever a duration is taken (issue 24 item 4):
window assigners, session gaps, triggers, allowed lateness, watermarks, async timeouts,
state TTL; and a declared output type through windows and async I/O (item 1)."""

from __future__ import annotations

import pytest

from barrierflow import (
    AsyncDataStream,
    Duration,
    StreamExecutionEnvironment,
    Time,
    Types,
    WatermarkStrategy,
)
from barrierflow.state import StateTtlConfig
from barrierflow.window import (
    ContinuousEventTimeTrigger,
    EventTimeSessionWindows,
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)


@pytest.mark.parametrize(
    ("time", "millis"),
    [
        (Time.milliseconds(5), 5),
        (Time.seconds(10), 10_000),
        (Time.minutes(2), 120_000),
        (Time.hours(1), 3_600_000),
        (Time.days(1), 86_400_000),
        (Time(250), 250),
    ],
)
def test_time_is_a_duration_of_its_milliseconds(time, millis):
    assert time == Duration.of_millis(millis)
    assert time.to_milliseconds() == millis


@pytest.mark.parametrize(
    ("assigner", "timestamp", "windows"),
    [
        (TumblingEventTimeWindows.of(Time.seconds(10)), 12_345, [TimeWindow(10_000, 20_000)]),
        (
            TumblingEventTimeWindows.of(Time.seconds(10), Time.seconds(1)),
            12_345,
            [TimeWindow(11_000, 21_000)],
        ),
        (
            SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)),
            12_000,
            [TimeWindow(10_000, 20_000), TimeWindow(5_000, 15_000)],
        ),
        (EventTimeSessionWindows.with_gap(Time.milliseconds(30)), 100, [TimeWindow(100, 130)]),
    ],
)
def test_event_time_assigners_take_time(assigner, timestamp, windows):
    assert assigner.assign_windows("e", timestamp, None) == windows


@pytest.mark.parametrize(
    ("with_time", "with_millis"),
    [
        (
            lambda: TumblingProcessingTimeWindows.of(Time.milliseconds(5)),
            lambda: TumblingProcessingTimeWindows.of(5),
        ),
        (
            lambda: SlidingProcessingTimeWindows.of(Time.seconds(10), Time.seconds(5)),
            lambda: SlidingProcessingTimeWindows.of(10_000, 5_000),
        ),
        (
            lambda: ProcessingTimeSessionWindows.with_gap(Time.minutes(1)),
            lambda: ProcessingTimeSessionWindows.with_gap(60_000),
        ),
        (
            lambda: ContinuousEventTimeTrigger.of(Time.seconds(2)),
            lambda: ContinuousEventTimeTrigger.of(2_000),
        ),
        (
            lambda: WatermarkStrategy.for_bounded_out_of_orderness(Time.seconds(2)),
            lambda: WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2)),
        ),
        (
            lambda: WatermarkStrategy.for_monotonous_timestamps().with_idleness(Time.seconds(3)),
            lambda: WatermarkStrategy.for_monotonous_timestamps().with_idleness(
                Duration.of_millis(3_000)
            ),
        ),
        (
            lambda: StateTtlConfig.new_builder(Time.seconds(1)).build(),
            lambda: StateTtlConfig.new_builder(Duration.of_millis(1_000)).build(),
        ),
    ],
)
def test_time_builds_what_milliseconds_build(with_time, with_millis):
    assert repr(with_time()) == repr(with_millis())


def _env_and_stream():
    env = StreamExecutionEnvironment.get_execution_environment()
    return env, env.from_collection([("a", 1)])


def test_allowed_lateness_takes_time_on_keyed_and_all_windows():
    _, stream = _env_and_stream()
    windowed = stream.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    assert windowed.allowed_lateness(Time.seconds(3))._allowed_lateness == 3_000
    all_windowed = stream.window_all(TumblingEventTimeWindows.of(Time.seconds(1)))
    all_windowed.allowed_lateness(Time.milliseconds(7))
    assert all_windowed._windowed._allowed_lateness == 7


async def _echo(value):
    return [value]


@pytest.mark.parametrize("wait", [AsyncDataStream.unordered_wait, AsyncDataStream.ordered_wait])
def test_async_io_takes_a_time_timeout_and_keeps_its_output_type(wait):
    env, stream = _env_and_stream()
    waited = wait(stream, _echo, Time.seconds(3), 10, Types.STRING())
    (spec,) = [t.operator_args[0] for t in env._transformations if t.name.startswith("Async")]
    assert spec.timeout_ms == 3_000
    assert waited._declared_type == Types.STRING()


ROW = Types.ROW([Types.STRING(), Types.INT()])


@pytest.mark.parametrize(
    "apply",
    [
        lambda w: w.reduce(lambda a, b: a, output_type=ROW),
        lambda w: w.process(_Passing(), output_type=ROW),
        lambda w: w.apply(_Passing(), output_type=ROW),
    ],
)
def test_window_functions_take_an_output_type_that_print_follows(apply):
    _, stream = _env_and_stream()
    windowed = stream.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    assert apply(windowed)._declared_type == ROW
    all_windowed = stream.window_all(TumblingEventTimeWindows.of(Time.seconds(1)))
    assert apply(all_windowed)._declared_type == ROW


class _Passing:
    def process(self, key, context, elements):
        yield from elements

    def apply(self, key, window, inputs):
        yield from inputs


def test_two_input_operators_keep_their_output_type():
    from barrierflow.functions import (
        CoFlatMapFunction,
        CoMapFunction,
        CoProcessFunction,
        KeyedCoProcessFunction,
    )

    class Map(CoMapFunction):
        def map1(self, value):
            return value

        def map2(self, value):
            return value

    class FlatMap(CoFlatMapFunction):
        def flat_map1(self, value):
            yield value

        def flat_map2(self, value):
            yield value

    class Process(CoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

    class KeyedProcess(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

    _, stream = _env_and_stream()
    connected = stream.connect(stream)
    assert connected.map(Map(), output_type=ROW)._declared_type == ROW
    assert connected.flat_map(FlatMap(), output_type=ROW)._declared_type == ROW
    assert connected.process(Process(), output_type=ROW)._declared_type == ROW
    keyed = stream.key_by(lambda r: r[0]).connect(stream.key_by(lambda r: r[0]))
    assert keyed.process(KeyedProcess(), output_type=ROW)._declared_type == ROW
    joined = (
        stream.key_by(lambda r: r[0])
        .interval_join(stream.key_by(lambda r: r[0]))
        .between(-1, 1)
        .process(lambda left, right, ctx: [left], output_type=ROW)
    )
    assert joined._declared_type == ROW
