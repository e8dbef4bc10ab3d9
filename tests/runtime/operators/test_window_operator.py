"""The WindowOperator driven directly: batches and watermarks in, window results and late
records out; window contents and timers surviving snapshot, restore and rescaling (no Spark).
The operator is set up, snapshotted and restored by the public harness (`barrierflow.testing`);
the tests hand it whole batches."""

from __future__ import annotations

from support.clocks import ManualClock
from support.operator_harness import fire_due, started

from barrierflow import OutputTag
from barrierflow.api.all_windowed_stream import _KeylessProcess
from barrierflow.functions import (
    AggregateFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
)
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.window import WindowOperator
from barrierflow.state.key_groups import assign_to_key_group
from barrierflow.testing import WindowOperatorHarness
from barrierflow.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)

LATE = OutputTag("late")


def add(a, b):
    return (a[0], a[1] + b[1])


FUNCTIONS = {"reduce": "reduce_function", "aggregate": "aggregate_function"}


def window_harness(assigner, contents, clock=None, trigger=None, allowed_lateness=0, late=LATE,
                   **settings):  # fmt: skip
    """The harness of `contents`, the operator's (kind, function, window function)."""
    kind, function, window_function = contents
    functions = {FUNCTIONS.get(kind, "window_function"): function}
    if window_function is not None:
        functions["window_function"] = window_function
    return WindowOperatorHarness(
        assigner, lambda r: r[0], trigger=trigger, allowed_lateness=allowed_lateness,
        late_data_tag=late, clock=clock or ManualClock(), **functions, **settings,
    )  # fmt: skip


def window_operator(assigner, contents, clock=None, **kw):
    harness = window_harness(assigner, contents, clock, **kw)
    return harness.operator, harness.output, harness.clock


def records(*triples):
    return RecordBatch([(k, v) for k, v, _ in triples], [t for _, _, t in triples])


class Summary(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, sorted(v for _, v in elements))


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, accumulator):
        return accumulator + 1

    def get_result(self, accumulator):
        return accumulator

    def merge(self, a, b):
        return a + b


def test_a_tumbling_window_fires_at_its_max_timestamp_when_the_watermark_passes_its_end():
    operator, out, _ = window_operator(TumblingEventTimeWindows.of(10), ("reduce", add, None))
    operator.process_batch(records(("a", 1, 3), ("a", 2, 7), ("b", 5, 12)))
    assert out.take() == []
    operator.process_watermark(Watermark(8))
    assert out.take() == [("watermark", 8)]
    operator.process_watermark(Watermark(9))
    assert out.take() == [("record", ("a", 3), 9), ("watermark", 9)]
    operator.process_watermark(Watermark(30))
    assert out.take() == [("record", ("b", 5), 19), ("watermark", 30)]


def test_a_record_late_for_all_its_windows_goes_to_the_late_data_side_output():
    operator, out, _ = window_operator(TumblingEventTimeWindows.of(10), ("reduce", add, None))
    operator.process_watermark(Watermark(20))
    out.take()
    operator.process_batch(records(("a", 1, 5), ("a", 2, 25)))
    assert out.take() == [("side", "late", ("a", 1), 5)]
    assert operator.num_late_records_dropped == 0


def test_without_a_late_data_tag_late_records_are_dropped_and_counted():
    operator, out, _ = window_operator(
        TumblingEventTimeWindows.of(10), ("reduce", add, None), late=None
    )
    operator.process_watermark(Watermark(20))
    operator.process_batch(records(("a", 1, 5)))
    assert out.take() == [("watermark", 20)]
    assert operator.num_late_records_dropped == 1


def test_allowed_lateness_fires_a_window_again_for_a_late_record():
    operator, out, _ = window_operator(
        TumblingEventTimeWindows.of(10), ("reduce", add, None), allowed_lateness=5
    )
    operator.process_batch(records(("a", 1, 3)))
    operator.process_watermark(Watermark(10))
    assert out.take() == [("record", ("a", 1), 9), ("watermark", 10)]
    operator.process_batch(records(("a", 2, 4)))
    assert out.take() == [("record", ("a", 3), 9)]
    operator.process_watermark(Watermark(14))
    operator.process_batch(records(("a", 4, 4)))
    assert out.take() == [("watermark", 14), ("side", "late", ("a", 4), 4)]


def test_sliding_windows_give_each_record_to_every_window_it_falls_in():
    operator, out, _ = window_operator(
        SlidingEventTimeWindows.of(10, 5), ("aggregate", Count(), None)
    )
    operator.process_batch(records(("a", 1, 3), ("a", 1, 7)))
    operator.process_watermark(Watermark(100))
    assert out.take() == [
        ("record", 1, 4),  # [-5, 5)
        ("record", 2, 9),  # [0, 10)
        ("record", 1, 14),  # [5, 15)
        ("watermark", 100),
    ]


def test_session_windows_merge_and_a_process_function_sees_the_merged_window():
    operator, out, _ = window_operator(
        EventTimeSessionWindows.with_gap(5), ("process", Summary(), None)
    )
    operator.process_batch(records(("a", 1, 1), ("a", 2, 10), ("a", 3, 4), ("b", 9, 2)))
    operator.process_watermark(Watermark(100))
    assert out.take() == [
        ("record", ("b", 2, 7, [9]), 6),
        ("record", ("a", 1, 9, [1, 3]), 8),  # 1 and 4 merged; 10 is past the gap
        ("record", ("a", 10, 15, [2]), 14),
        ("watermark", 100),
    ]


def test_processing_time_windows_fire_when_the_clock_reaches_their_end():
    clock = ManualClock(1_000)
    operator, out, _ = window_operator(
        TumblingProcessingTimeWindows.of(100), ("reduce", add, None), clock=clock
    )
    operator.process_batch(RecordBatch([("a", 1), ("a", 2)]))
    assert operator.next_wakeup() == 1_099
    clock.advance(98)
    fire_due(operator, clock)
    assert out.take() == []
    clock.advance(1)
    fire_due(operator, clock)
    assert out.take() == [("record", ("a", 3), 1_099)]


def test_window_contents_and_timers_survive_a_snapshot_and_restore():
    assigner, contents = SlidingEventTimeWindows.of(10, 5), ("reduce", add, None)
    harness = window_harness(assigner, contents)
    operator, out = harness.operator, harness.output
    operator.process_batch(records(("a", 1, 3), ("b", 10, 8)))
    operator.process_watermark(Watermark(4))
    assert out.take() == [("record", ("a", 1), 4), ("watermark", 4)]
    snapshot = harness.snapshot()
    assert snapshot.subtasks[0].keyed is not None and snapshot.subtasks[0].timers is not None
    operator.process_batch(records(("a", 100, 6)))  # after the checkpoint: not in it

    again, out2, _ = window_operator(assigner, contents, restore_from=snapshot)
    again.process_batch(records(("a", 2, 6)))
    again.process_watermark(Watermark(20))
    assert out2.take() == [
        ("record", ("a", 3), 9),
        ("record", ("b", 10), 9),
        ("record", ("a", 2), 14),
        ("record", ("b", 10), 14),
        ("watermark", 20),
    ]


def test_a_restore_at_another_parallelism_takes_only_its_own_keys_windows_and_timers():
    assigner, contents = TumblingEventTimeWindows.of(10), ("reduce", add, None)
    harness = window_harness(assigner, contents)
    keys = [f"k{i}" for i in range(20)]
    harness.operator.process_batch(records(*[(k, 1, 3) for k in keys]))
    snapshot = harness.snapshot()

    results = []
    for index in (0, 1):
        part, out, _ = window_operator(
            assigner, contents, restore_from=snapshot, parallelism=2, subtask_index=index
        )
        half = part.context.key_group_range
        part.process_watermark(Watermark(10))
        fired = [event[1][0] for event in out.take() if event[0] == "record"]
        assert all(assign_to_key_group(k, 128) in half for k in fired)
        results += fired
    assert sorted(results) == sorted(keys)


class Everything(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield (context.window().start, sorted(v for _, v in elements))


def test_an_all_window_function_sees_every_key_of_its_window():
    operator = WindowOperator(
        "all", "all", lambda r: 0, TumblingEventTimeWindows.of(10),
        ("process", _KeylessProcess(Everything()), None),
    )  # fmt: skip
    _, out = started(operator, ManualClock())
    operator.process_batch(records(("a", 1, 3), ("b", 2, 5), ("c", 3, 12)))
    operator.process_watermark(Watermark(9))
    assert out.take() == [("record", (0, [1, 2]), 9), ("watermark", 9)]
