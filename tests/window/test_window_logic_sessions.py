"""Session windows in WindowLogic: merging on arrival, the merged window's contents and
trigger state, and cleanup of the merging-window set."""

from __future__ import annotations

import pytest
from window_harness import Average, WindowHarness, add, results

from barrierflow.errors import ConfigurationError
from barrierflow.runtime.windowing import (
    AggregatingWindowContents,
    ListWindowContents,
    ProcessWindowFunction,
    ReducingWindowContents,
)
from barrierflow.state import ValueStateDescriptor
from barrierflow.window import (
    CountTrigger,
    EventTimeSessionWindows,
    MergingWindowAssigner,
    ProcessingTimeSessionWindows,
    PurgingTrigger,
    TimeWindow,
    Trigger,
    TriggerResult,
)


class Session(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield (key, window.start, window.end, sorted(elements))


def sessions(gap: int = 10, **options) -> WindowHarness:
    return WindowHarness(
        EventTimeSessionWindows.with_gap(gap), ListWindowContents(Session()), **options
    )


def test_elements_within_the_gap_form_one_session():
    harness = sessions()
    harness.element(1, 0)
    harness.element(2, 5)
    harness.element(3, 15)  # 15 < 5 + 10
    harness.element(4, 40)
    assert results(harness.advance_watermark(24)) == [(("k", 0, 25, [1, 2, 3]), 24)]
    assert results(harness.advance_watermark(100)) == [(("k", 40, 50, [4]), 49)]
    assert harness.is_empty()


def test_an_out_of_order_element_bridges_two_sessions():
    harness = sessions()
    harness.element("a", 0)  # [0, 10)
    harness.element("b", 20)  # [20, 30)
    assert harness.state.get("merging-window-set", "k", None) == [
        (TimeWindow(0, 10), TimeWindow(0, 10)),
        (TimeWindow(20, 30), TimeWindow(20, 30)),
    ]
    harness.element("c", 10)  # [10, 20) touches both
    assert harness.state.get("merging-window-set", "k", None) in (
        [(TimeWindow(0, 30), TimeWindow(0, 10))],
        [(TimeWindow(0, 30), TimeWindow(20, 30))],
    )
    assert [t.timestamp for t in harness.timers.event_time_timers()] == [29]
    assert results(harness.advance_watermark(29)) == [(("k", 0, 30, ["a", "b", "c"]), 29)]
    assert harness.is_empty()


def test_sessions_reduce_and_aggregate_merge_their_partial_results():
    reduced = WindowHarness(EventTimeSessionWindows.with_gap(10), ReducingWindowContents(add))
    averaged = WindowHarness(
        EventTimeSessionWindows.with_gap(10), AggregatingWindowContents(Average())
    )
    for harness in (reduced, averaged):
        for value, timestamp in [(1, 0), (2, 20), (3, 10), (6, 100)]:
            harness.element(value, timestamp)
    assert results(reduced.advance_watermark(200)) == [(6, 29), (6, 109)]
    assert results(averaged.advance_watermark(200)) == [(2.0, 29), (6.0, 109)]


def test_keys_have_their_own_sessions():
    harness = sessions()
    harness.element(1, 0, key="a")
    harness.element(2, 5, key="b")
    harness.element(3, 9, key="a")
    assert sorted(item.value for item in harness.advance_watermark(100)) == [
        ("a", 0, 19, [1, 3]),
        ("b", 5, 15, [2]),
    ]


def test_a_count_trigger_counts_across_merged_sessions():
    harness = sessions(trigger=CountTrigger.of(3))
    assert harness.element(1, 0) == []
    assert harness.element(2, 20) == []
    assert results(harness.element(3, 10)) == [(("k", 0, 30, [1, 2, 3]), 29)]  # 1 + 1 + 1
    assert results(harness.element(4, 16)) == []  # the count started again
    harness.advance_watermark(1000)
    assert harness.is_empty()


def test_a_purging_count_trigger_on_sessions_emits_only_new_elements():
    harness = sessions(trigger=PurgingTrigger.of(CountTrigger.of(2)))
    assert harness.element(1, 0) == []
    assert results(harness.element(2, 5)) == [(("k", 0, 15, [1, 2]), 14)]
    assert harness.element(3, 6) == []
    assert results(harness.element(4, 7)) == [(("k", 0, 17, [3, 4]), 16)]


def test_dynamic_gap_sessions_keep_their_contents_when_a_merged_window_is_added_again():
    # Flink would lose 1 and 2 here (see MergingWindowSet's deliberate deviation).
    harness = WindowHarness(
        EventTimeSessionWindows.with_dynamic_gap(lambda element: element[1]),
        ListWindowContents(Session()),
    )
    harness.element(("x", 1), 1)  # [1, 2)
    harness.element(("y", 3), 0)  # [0, 3) covers it
    harness.element(("z", 3), 0)  # [0, 3) again
    assert results(harness.advance_watermark(10)) == [
        (("k", 0, 3, [("x", 1), ("y", 3), ("z", 3)]), 2)
    ]
    assert harness.is_empty()


def test_processing_time_sessions_fire_when_the_clock_passes_the_gap():
    harness = WindowHarness(
        ProcessingTimeSessionWindows.with_gap(10), ListWindowContents(Session())
    )
    harness.processing_time = 100
    harness.element("a", None)
    harness.processing_time = 105
    harness.element("b", None)
    assert harness.advance_processing_time(113) == []
    assert results(harness.advance_processing_time(114)) == [(("k", 100, 115, ["a", "b"]), 114)]
    assert harness.is_empty()


def test_a_merging_assigner_needs_a_trigger_that_can_merge():
    class NoMerge(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            return TriggerResult.CONTINUE

        def on_event_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def on_processing_time(self, time, window, ctx):
            return TriggerResult.CONTINUE

        def clear(self, window, ctx):
            pass

    with pytest.raises(ConfigurationError, match="does not support merging"):
        sessions(trigger=NoMerge())


def test_per_window_state_is_refused_for_merging_windows():
    class UsesWindowState(ProcessWindowFunction):
        def process(self, key, context, elements):
            context.window_state().get_state(ValueStateDescriptor("x"))
            return []

    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(10), ListWindowContents(UsesWindowState())
    )
    harness.element(1, 0)
    with pytest.raises(ConfigurationError, match="Per-window state"):
        harness.advance_watermark(100)


def test_a_merge_that_would_end_a_window_before_the_watermark_is_refused():
    class ShrinkingSessions(MergingWindowAssigner):
        """Merges every two windows into one that ends at the earliest end (a broken assigner)."""

        def assign_windows(self, element, timestamp, context):
            return [TimeWindow(timestamp, timestamp + 10)]

        def get_default_trigger(self, env=None):
            return EventTimeSessionWindows.with_gap(1).get_default_trigger()

        def is_event_time(self):
            return True

        def merge_windows(self, windows, callback):
            windows = sorted(windows)
            if len(windows) > 1:
                callback.merge(windows, TimeWindow(windows[0].start, windows[0].start + 1))

    harness = WindowHarness(ShrinkingSessions(), ListWindowContents(Session()))
    harness.element(1, 0)
    harness.advance_watermark(5)
    with pytest.raises(
        ConfigurationError, match="cannot become earlier than the current watermark"
    ):
        harness.element(2, 3)


def test_merging_deletes_the_timers_of_the_merged_windows():
    harness = sessions(allowed_lateness=5)
    harness.element("a", 0)  # [0, 10): trigger timer 9, cleanup timer 14
    harness.element("b", 20)  # [20, 30): 29 and 34
    harness.element("c", 10)  # all merge into [0, 30)
    assert sorted(
        (timer.window, timer.timestamp) for timer in harness.timers.event_time_timers()
    ) == [(TimeWindow(0, 30), 29), (TimeWindow(0, 30), 34)]
    assert results(harness.advance_watermark(29)) == [(("k", 0, 30, ["a", "b", "c"]), 29)]
    assert harness.element("d", 25) == []  # extends the fired session to [0, 35)
    assert results(harness.advance_watermark(34)) == [(("k", 0, 35, ["a", "b", "c", "d"]), 34)]
    assert harness.advance_watermark(39) == []
    assert harness.is_empty()
