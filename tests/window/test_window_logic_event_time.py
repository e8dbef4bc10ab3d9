"""WindowLogic on event-time windows, driven with a watermark: tumbling and sliding windows
with reduce, aggregate and process window functions, and the state they leave behind."""

from __future__ import annotations

import pytest
from window_harness import Average, WindowHarness, add, results

from barrierflow.errors import ConfigurationError
from barrierflow.runtime.windowing import (
    AggregatingWindowContents,
    InMemoryWindowState,
    InMemoryWindowTimers,
    ListWindowContents,
    ProcessWindowFunction,
    ReducingWindowContents,
    WindowFunction,
)
from barrierflow.state import ValueStateDescriptor
from barrierflow.window import (
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
)


class Describe(ProcessWindowFunction):
    """Emits what the context shows, and the elements in arrival order."""

    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, context.current_watermark(), list(elements))


def tumbling_sum(**options) -> WindowHarness:
    return WindowHarness(TumblingEventTimeWindows.of(10), ReducingWindowContents(add), **options)


def test_a_tumbling_window_fires_once_the_watermark_reaches_its_max_timestamp():
    harness = tumbling_sum()
    assert harness.element(1, 0) == []
    assert harness.element(2, 9) == []
    assert harness.element(4, 10) == []
    assert harness.advance_watermark(8) == []
    assert results(harness.advance_watermark(9)) == [(3, 9)]
    assert harness.advance_watermark(18) == []
    assert results(harness.advance_watermark(25)) == [(4, 19)]
    assert harness.is_empty()


def test_out_of_order_elements_land_in_their_window_until_it_fires():
    harness = tumbling_sum()
    for value, timestamp in [(1, 15), (2, 3), (4, 12), (8, 7)]:
        assert harness.element(value, timestamp) == []
    assert harness.advance_watermark(5) == []
    assert harness.element(16, 1) == []  # behind the watermark, but its window is open
    assert results(harness.advance_watermark(20)) == [(2 + 8 + 16, 9), (1 + 4, 19)]


def test_keys_have_their_own_windows():
    harness = tumbling_sum()
    harness.element(1, 1, key="a")
    harness.element(10, 2, key="b")
    harness.element(100, 3, key="a")
    emitted = harness.advance_watermark(9)
    assert sorted((item.value, item.window) for item in emitted) == [
        (10, TimeWindow(0, 10)),
        (101, TimeWindow(0, 10)),
    ]


def test_a_sliding_window_sum_counts_each_element_in_every_window_it_belongs_to():
    harness = WindowHarness(SlidingEventTimeWindows.of(10, 5), ReducingWindowContents(add))
    harness.element(1, 2)  # [-5, 5) [0, 10)
    harness.element(10, 7)  # [0, 10) [5, 15)
    harness.element(100, 12)  # [5, 15) [10, 20)
    assert results(harness.advance_watermark(4)) == [(1, 4)]
    assert results(harness.advance_watermark(9)) == [(11, 9)]
    assert results(harness.advance_watermark(14)) == [(110, 14)]
    assert results(harness.advance_watermark(100)) == [(100, 19)]
    assert harness.is_empty()


def test_an_aggregate_function_keeps_an_accumulator_and_emits_its_result():
    harness = WindowHarness(TumblingEventTimeWindows.of(10), AggregatingWindowContents(Average()))
    for value, timestamp in [(1, 1), (2, 2), (6, 3)]:
        harness.element(value, timestamp)
    assert harness.state.entries() == {("window-contents", "k", TimeWindow(0, 10)): (9, 3)}
    assert results(harness.advance_watermark(9)) == [(3.0, 9)]


def test_a_process_window_function_sees_key_window_watermark_and_all_elements():
    harness = WindowHarness(TumblingEventTimeWindows.of(10), ListWindowContents(Describe()))
    for value, timestamp in [("a", 14), ("b", 11), ("c", 19)]:
        harness.element(value, timestamp, key="user")
    assert results(harness.advance_watermark(30)) == [(("user", 10, 20, 30, ["a", "b", "c"]), 19)]


def test_a_process_window_function_after_a_reduce_sees_the_one_reduced_value():
    harness = WindowHarness(
        TumblingEventTimeWindows.of(10), ReducingWindowContents(add, Describe())
    )
    for value in [1, 2, 3]:
        harness.element(value, 5)
    assert harness.state.entries() == {("window-contents", "k", TimeWindow(0, 10)): 6}
    assert results(harness.advance_watermark(9)) == [(("k", 0, 10, 9, [6]), 9)]


def test_a_process_window_function_after_an_aggregate_sees_the_aggregate_result():
    harness = WindowHarness(
        TumblingEventTimeWindows.of(10), AggregatingWindowContents(Average(), Describe())
    )
    harness.element(1, 5)
    harness.element(3, 6)
    assert results(harness.advance_watermark(9)) == [(("k", 0, 10, 9, [2.0]), 9)]


def test_a_process_function_may_emit_several_results_or_none():
    def several(key, context, elements):
        return [value for value in elements if value % 2] or None

    harness = WindowHarness(TumblingEventTimeWindows.of(10), ListWindowContents(several))
    for value, timestamp in [(1, 1), (2, 2), (3, 3), (4, 14)]:
        harness.element(value, timestamp)
    assert results(harness.advance_watermark(100)) == [(1, 9), (3, 9)]


def test_a_window_function_applies_to_key_window_and_inputs():
    class Apply(WindowFunction):
        def apply(self, key, window, inputs):
            return [(key, window, sum(inputs))]

    harness = WindowHarness(TumblingEventTimeWindows.of(10), ListWindowContents(Apply()))
    harness.element(1, 1)
    harness.element(2, 2)
    assert results(harness.advance_watermark(9)) == [(("k", TimeWindow(0, 10), 3), 9)]


def test_window_state_and_global_state_are_scoped_and_clear_runs_at_cleanup():
    firings = ValueStateDescriptor("firings")
    seen = ValueStateDescriptor("seen")
    cleared = []

    class Counting(ProcessWindowFunction):
        def process(self, key, context, elements):
            per_window = context.window_state().get_state(firings)
            per_window.update((per_window.value() or 0) + 1)
            per_key = context.global_state().get_state(seen)
            per_key.update((per_key.value() or 0) + len(elements))
            yield (context.window().start, per_window.value(), per_key.value())

        def clear(self, context):
            cleared.append(context.window())
            context.window_state().get_state(firings).clear()

    harness = WindowHarness(
        TumblingEventTimeWindows.of(10), ListWindowContents(Counting()), allowed_lateness=5
    )
    harness.element("a", 1)
    assert results(harness.advance_watermark(9)) == [((0, 1, 1), 9)]
    assert results(harness.element("b", 2)) == [((0, 2, 3), 9)]  # late re-firing
    harness.element("c", 12)
    assert results(harness.advance_watermark(14)) == []
    assert cleared == [TimeWindow(0, 10)]
    assert results(harness.advance_watermark(19)) == [((10, 1, 4), 19)]
    assert harness.advance_watermark(24) == []
    assert cleared == [TimeWindow(0, 10), TimeWindow(10, 20)]
    assert harness.state.entries() == {("seen", "k", None): 4}  # global state outlives windows


def test_a_window_emits_at_its_max_timestamp_only_the_elements_it_holds():
    harness = tumbling_sum()
    harness.element(5, -1)
    assert [(item.value, item.timestamp, item.window) for item in harness.advance_watermark(0)] == [
        (5, -1, TimeWindow(-10, 0))
    ]


def test_cleanup_removes_contents_and_timers_of_every_fired_window():
    harness = WindowHarness(SlidingEventTimeWindows.of(30, 10), ListWindowContents(Describe()))
    for timestamp in range(0, 100, 7):
        harness.element(timestamp, timestamp, key=timestamp % 3)
    assert len(harness.state) > 0
    harness.advance_watermark(50)
    assert all(window.max_timestamp() > 50 for _, _, window in harness.state.entries())
    harness.advance_watermark(2**63 - 1)
    assert harness.is_empty()


def test_state_and_timers_are_all_the_logic_remembers():
    def run(restart_at: int | None) -> list:
        harness = WindowHarness(SlidingEventTimeWindows.of(10, 5), ReducingWindowContents(add))
        emitted = []
        events = [(3, 1), (8, 2), ("wm", 4), (6, 4), (13, 8), ("wm", 9), (21, 16), ("wm", 30)]
        for step, (a, b) in enumerate(events):
            if step == restart_at:
                harness = WindowHarness(
                    SlidingEventTimeWindows.of(10, 5),
                    ReducingWindowContents(add),
                    state=InMemoryWindowState.restore(harness.state.snapshot()),
                    timers=InMemoryWindowTimers.restore(harness.timers.snapshot()),
                    watermark=harness.watermark,
                )
            emitted += harness.advance_watermark(b) if a == "wm" else harness.element(a, b)
        return emitted

    uninterrupted = run(None)
    assert results(uninterrupted)
    for restart_at in range(1, 8):
        assert run(restart_at) == uninterrupted


def test_negative_allowed_lateness_is_refused():
    with pytest.raises(ConfigurationError, match="negative"):
        tumbling_sum(allowed_lateness=-1)


def test_user_functions_are_opened_and_closed_with_the_logic():
    calls = []

    class Tracked(ProcessWindowFunction):
        def open(self, runtime_context):
            calls.append(("open", runtime_context))

        def close(self):
            calls.append("close")

        def process(self, key, context, elements):
            return elements

    harness = WindowHarness(TumblingEventTimeWindows.of(10), ListWindowContents(Tracked()))
    harness.logic.open("ctx")
    harness.logic.close()
    assert calls == [("open", "ctx"), "close"]


def test_an_object_with_apply_open_and_close_serves_as_a_window_function():
    # Shaped like the window join's CoGroupWindowFunction, which is no WindowFunction subclass.
    calls = []

    class CoGroupLike:
        def apply(self, key, window, inputs):
            return [(key, window.start, sorted(inputs))]

        def open(self, runtime_context):
            calls.append("open")

        def close(self):
            calls.append("close")

    harness = WindowHarness(TumblingEventTimeWindows.of(10), ListWindowContents(CoGroupLike()))
    harness.logic.open(None)
    harness.element(2, 1)
    harness.element(1, 2)
    assert results(harness.advance_watermark(9)) == [(("k", 0, [1, 2]), 9)]
    harness.logic.close()
    assert calls == ["open", "close"]
