"""WindowLogic with triggers other than the default: count and purging triggers, early
firings, processing-time windows driven by a manual clock."""

from __future__ import annotations

from window_harness import WindowHarness, add, results

from barrierflow.runtime.windowing import ListWindowContents, ReducingWindowContents
from barrierflow.window import (
    MAX_TIMESTAMP,
    ContinuousEventTimeTrigger,
    CountTrigger,
    GlobalWindow,
    GlobalWindows,
    ProcessingTimeTrigger,
    PurgingTrigger,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)


def elements(key, context, values):
    return [list(values)]


def test_a_count_trigger_on_global_windows_fires_every_n_elements_without_cleanup_timers():
    harness = WindowHarness(
        GlobalWindows.create(), ListWindowContents(elements), trigger=CountTrigger.of(2)
    )
    assert harness.element(1, 0) == []
    assert results(harness.element(2, 0)) == [([1, 2], MAX_TIMESTAMP)]
    assert harness.element(3, 0) == []
    assert results(harness.element(4, 0)) == [([1, 2, 3, 4], MAX_TIMESTAMP)]
    assert harness.timers.event_time_timers() == []
    assert harness.timers.processing_time_timers() == []
    assert harness.advance_watermark(MAX_TIMESTAMP) == []
    assert harness.state.get("window-contents", "k", GlobalWindow.get()) == [1, 2, 3, 4]


def test_a_purging_count_trigger_starts_each_window_afresh():
    harness = WindowHarness(
        GlobalWindows.create(),
        ListWindowContents(elements),
        trigger=PurgingTrigger.of(CountTrigger.of(2)),
    )
    emitted = []
    for value in range(1, 6):
        emitted += harness.element(value, 0)
    assert results(emitted) == [([1, 2], MAX_TIMESTAMP), ([3, 4], MAX_TIMESTAMP)]
    assert harness.state.get("window-contents", "k", GlobalWindow.get()) == [5]


def test_a_count_trigger_on_event_time_windows_is_cleaned_up_at_the_window_end():
    harness = WindowHarness(
        TumblingEventTimeWindows.of(10), ReducingWindowContents(add), trigger=CountTrigger.of(2)
    )
    assert harness.element(1, 1) == []
    assert results(harness.element(2, 2)) == [(3, 9)]
    assert harness.element(4, 3) == []
    # The count trigger does not fire on time; the cleanup timer drops contents and count.
    assert harness.advance_watermark(9) == []
    assert harness.is_empty()


def test_a_continuous_event_time_trigger_fires_early_and_at_the_end():
    harness = WindowHarness(
        TumblingEventTimeWindows.of(20),
        ReducingWindowContents(add),
        trigger=ContinuousEventTimeTrigger.of(5),
    )
    harness.element(1, 3)
    harness.element(2, 4)
    assert results(harness.advance_watermark(5)) == [(3, 19)]
    harness.element(4, 12)
    assert results(harness.advance_watermark(12)) == [(7, 19)]  # at 10
    assert results(harness.advance_watermark(19)) == [(7, 19), (7, 19)]  # at 15, at the end
    assert harness.is_empty()


def test_processing_time_windows_fire_when_the_clock_reaches_their_end():
    harness = WindowHarness(TumblingProcessingTimeWindows.of(10), ReducingWindowContents(add))
    harness.processing_time = 3
    harness.element(1, -1000)
    harness.processing_time = 9
    harness.element(2, 5000)
    harness.processing_time = 10
    harness.element(4, 0)
    assert [t.timestamp for t in harness.timers.processing_time_timers()] == [9, 19]
    assert results(harness.advance_processing_time(8)) == []
    emitted = harness.advance_processing_time(25)
    assert [(i.value, i.window) for i in emitted] == [
        (3, TimeWindow(0, 10)),
        (4, TimeWindow(10, 20)),
    ]
    assert harness.is_empty()


def test_sliding_processing_time_windows_put_each_element_in_every_window_of_its_time():
    harness = WindowHarness(SlidingProcessingTimeWindows.of(10, 5), ReducingWindowContents(add))
    harness.processing_time = 7
    harness.element(1, 0)
    harness.processing_time = 12
    harness.element(2, 0)
    assert results(harness.advance_processing_time(100)) == [(1, 9), (3, 14), (2, 19)]


def test_watermarks_do_not_fire_processing_time_windows():
    harness = WindowHarness(TumblingProcessingTimeWindows.of(10), ReducingWindowContents(add))
    harness.element(1, 0)
    assert harness.advance_watermark(MAX_TIMESTAMP) == []
    assert results(harness.advance_processing_time(9)) == [(1, 9)]


def test_event_time_windows_with_a_processing_time_trigger_are_cleaned_up_by_the_watermark():
    harness = WindowHarness(
        TumblingEventTimeWindows.of(10),
        ReducingWindowContents(add),
        trigger=ProcessingTimeTrigger.create(),
    )
    harness.element(1, 3)
    assert results(harness.advance_processing_time(9)) == [(1, 9)]
    assert harness.state.entries() != {}  # a processing-time timer does not clean up here
    harness.element(2, 4)
    assert results(harness.advance_processing_time(9)) == [(3, 9)]
    assert harness.advance_watermark(9) == []
    assert harness.is_empty()


def test_a_window_that_is_empty_when_its_trigger_fires_emits_nothing():
    def forget(a, b):
        return None  # a reduce that empties the window

    harness = WindowHarness(
        TumblingEventTimeWindows.of(10), ReducingWindowContents(forget), trigger=CountTrigger.of(2)
    )
    assert harness.element(1, 1) == []
    assert harness.element(2, 2) == []
    assert len(harness.state) == 0
