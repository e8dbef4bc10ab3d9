"""WindowOperatorHarness, event by event: tumbling, sliding, session, count and
processing-time windows with reduce, aggregate and process window functions, a custom
trigger, allowed lateness with the late side output, and a 2 -> 3 -> 1 rescale matching
one run."""

from __future__ import annotations

import pytest

from barrierflow import EmbeddedRocksDBStateBackend, HashMapStateBackend, OutputTag
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.testing import ParallelHarness, WindowOperatorHarness
from barrierflow.window import (
    MAX_TIMESTAMP,
    ContinuousEventTimeTrigger,
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)

LATE = OutputTag("late")


def add(a, b):
    return (a[0], a[1] + b[1])


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value[1], accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, sorted(v for _, v in elements))


def by_key(record):
    return record[0]


# (action, argument, timestamp, what the harness emits for it)
TUMBLING_WITH_LATENESS = [
    ("element", ("a", 1), 1, []),
    ("element", ("a", 2), 8, []),
    ("element", ("b", 5), 12, []),
    ("watermark", 9, None, [("record", ("a", 3), 9), ("watermark", 9)]),
    ("element", ("a", 4), 2, [("record", ("a", 7), 9)]),  # late, allowed: fires again
    ("watermark", 14, None, [("watermark", 14)]),  # window [0, 10) kept until 14
    ("element", ("a", 8), 3, [("side", "late", ("a", 8), 3)]),  # too late for it
    ("watermark", 19, None, [("record", ("b", 5), 19), ("watermark", 19)]),
]  # fmt: skip

SLIDING_AVERAGE = [
    ("element", ("a", 2), 4, []),
    ("element", ("a", 4), 7, []),
    ("watermark", 4, None, [("record", 2.0, 4), ("watermark", 4)]),  # [-5, 5)
    ("watermark", 9, None, [("record", 3.0, 9), ("watermark", 9)]),  # [0, 10)
    ("watermark", 14, None, [("record", 4.0, 14), ("watermark", 14)]),  # [5, 15)
]  # fmt: skip

SESSIONS = [
    ("element", ("a", 1), 10, []),
    ("element", ("a", 2), 13, []),
    ("element", ("b", 3), 14, []),
    ("watermark", 16, None, [("watermark", 16)]),
    ("element", ("a", 3), 17, []),  # joins a's session [10, 18) -> [10, 22)
    ("watermark", 20, None, [("record", ("b", 14, 19, [3]), 18), ("watermark", 20)]),
    ("watermark", 30, None, [("record", ("a", 10, 22, [1, 2, 3]), 21), ("watermark", 30)]),
]  # fmt: skip

CONTINUOUS = [
    ("element", ("a", 1), 1, []),
    ("watermark", 4, None, [("watermark", 4)]),
    ("watermark", 5, None, [("record", ("a", 1), 9), ("watermark", 5)]),  # early firing
    ("element", ("a", 2), 6, []),
    ("watermark", 9, None, [("record", ("a", 3), 9), ("watermark", 9)]),
]  # fmt: skip

PROCESSING_TIME = [
    ("element", ("a", 1), None, []),
    ("time", 4, None, []),
    ("element", ("a", 2), None, []),
    ("time", 10, None, [("record", ("a", 3), 9)]),
    ("element", ("a", 5), None, []),
    ("time", 25, None, [("record", ("a", 5), 19)]),
]  # fmt: skip

COUNT = [
    ("element", ("a", 1), 1, []),
    ("element", ("b", 2), 2, []),
    ("element", ("a", 3), 3, [("record", ("a", 4), MAX_TIMESTAMP)]),  # a's second element
    ("watermark", 50, None, [("watermark", 50)]),  # event time fires no count window
    ("element", ("a", 5), 4, []),
    ("element", ("b", 6), 5, [("record", ("b", 8), MAX_TIMESTAMP)]),
]  # fmt: skip

SCENARIOS = {
    "tumbling with lateness": (
        TumblingEventTimeWindows.of(10),
        dict(reduce_function=add, allowed_lateness=5, late_data_tag=LATE),
        TUMBLING_WITH_LATENESS,
    ),
    "sliding average": (
        SlidingEventTimeWindows.of(10, 5),
        dict(aggregate_function=Average()),
        SLIDING_AVERAGE,
    ),
    "sessions": (EventTimeSessionWindows.with_gap(5), dict(window_function=Describe()), SESSIONS),
    "continuous trigger": (
        TumblingEventTimeWindows.of(10),
        dict(reduce_function=add, trigger=ContinuousEventTimeTrigger.of(5)),
        CONTINUOUS,
    ),
    "count windows": (
        CountTumblingWindowAssigner.of(2),
        dict(reduce_function=add),
        COUNT,
    ),
    "processing time": (
        TumblingProcessingTimeWindows.of(10),
        dict(reduce_function=add),
        PROCESSING_TIME,
    ),
}


def apply(target, action, argument, timestamp):
    if action == "element":
        target.process_element(argument, timestamp)
    elif action == "watermark":
        target.process_watermark(argument)
    else:
        target.set_processing_time(argument)


@pytest.mark.parametrize("backend", [HashMapStateBackend(), EmbeddedRocksDBStateBackend()],
                         ids=["heap", "rocksdb"])  # fmt: skip
@pytest.mark.parametrize("name", SCENARIOS)
def test_each_window_scenario_event_by_event(name, backend):
    assigner, functions, scenario = SCENARIOS[name]
    with WindowOperatorHarness(assigner, by_key, state_backend=backend, **functions) as h:
        for step, (action, argument, timestamp, expected) in enumerate(scenario):
            apply(h, action, argument, timestamp)
            assert h.take_output() == expected, f"{name}, step {step}: {action} {argument}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_restore_after_every_step_gives_the_same_outputs(name):
    assigner, functions, scenario = SCENARIOS[name]
    h = WindowOperatorHarness(assigner, by_key, **functions)
    for step, (action, argument, timestamp, expected) in enumerate(scenario):
        apply(h, action, argument, timestamp)
        assert h.take_output() == expected, f"{name}, step {step}"
        snapshot, now = h.snapshot(), h.get_processing_time()
        h.close()
        h = WindowOperatorHarness(
            assigner, by_key, restore_from=snapshot, processing_time=now, **functions
        )
        passed = [argument for kind, argument, _, _ in scenario[: step + 1] if kind == "watermark"]
        if passed:  # a restored operator's event time starts over: upstream sends it again
            h.process_watermark(passed[-1])
            assert h.take_output() == [("watermark", passed[-1])]


def test_late_records_without_a_side_output_are_counted_and_dropped():
    h = WindowOperatorHarness(TumblingEventTimeWindows.of(10), by_key, reduce_function=add)
    h.process_watermark(20)
    h.process_element(("a", 1), 3)
    assert h.take_output() == [("watermark", 20)]
    assert h.num_late_records_dropped == 1


def test_window_timers_are_visible_per_key():
    h = WindowOperatorHarness(SlidingEventTimeWindows.of(10, 5), by_key, reduce_function=add)
    h.process_element(("a", 1), 7)
    timers = [(ts, (w.start, w.end)) for ts, w in h.window_timers("a")]
    assert timers == [(9, (0, 10)), (14, (5, 15))]
    assert h.window_timers("b") == []


EVENTS = [
    *[("element", (f"k{n % 9}", n), n, None) for n in range(40)],
    ("watermark", 19, None, None),
    *[("element", (f"k{n % 9}", n), n, None) for n in range(15, 45)],  # 15-19: late, allowed
    ("watermark", 35, None, None),
    *[("element", (f"k{n % 9}", n), n, None) for n in [*range(5, 10), *range(25, 30)]],  # dropped
    ("watermark", 60, None, None),
]
"""Nine keys over every subtask; windows fire, fire again for allowed late records, and
refuse records past their lateness, on both sides of each cut."""


def parallel(parallelism, restore_from=None):
    def make(**settings):
        return WindowOperatorHarness(
            TumblingEventTimeWindows.of(10), by_key, reduce_function=add,
            allowed_lateness=3, late_data_tag=LATE, **settings,
        )  # fmt: skip

    return ParallelHarness(make, parallelism, restore_from=restore_from)


def test_windows_rescaled_2_to_3_to_1_give_the_outputs_of_one_run():
    one = parallel(1)
    for event in EVENTS:
        apply(one, *event[:3])
    expected = sorted(one.extract_output_values()), sorted(one.get_side_output(LATE))
    assert expected[1], "the scenario has late records"

    cuts = [0, 25, 60, len(EVENTS)]
    main, late, snapshot, watermark = [], [], None, None
    for parallelism, start, end in zip([2, 3, 1], cuts[:-1], cuts[1:], strict=True):
        h = parallel(parallelism, restore_from=snapshot)
        if watermark is not None:  # a restored operator's event time starts over
            h.process_watermark(watermark)
        for event in EVENTS[start:end]:
            apply(h, *event[:3])
            if event[0] == "watermark":
                watermark = event[1]
        main += h.extract_output_values()
        late += h.get_side_output(LATE)
        snapshot = h.snapshot()
        h.close()
    assert (sorted(main), sorted(late)) == expected
