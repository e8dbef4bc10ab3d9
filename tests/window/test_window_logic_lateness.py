"""Lateness in WindowLogic: Flink's isWindowLate / isElementLate, the late-data side output,
allowed lateness re-firing, and cleanup at max_timestamp + allowed lateness."""

from __future__ import annotations

from window_harness import WindowHarness, add, late, results

from barrierflow.runtime.windowing import (
    LateElement,
    ListWindowContents,
    ReducingWindowContents,
)
from barrierflow.window import (
    CountTrigger,
    EventTimeSessionWindows,
    GlobalWindows,
    SlidingEventTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)


def tumbling_sum(**options) -> WindowHarness:
    return WindowHarness(TumblingEventTimeWindows.of(10), ReducingWindowContents(add), **options)


def test_an_element_for_a_fired_window_goes_to_the_late_side_output():
    harness = tumbling_sum(side_output_late_data=True)
    harness.element(1, 5)
    assert results(harness.advance_watermark(9)) == [(1, 9)]
    assert late(harness.element(2, 9)) == [(2, 9)]
    assert late(harness.element(4, 0)) == [(4, 0)]
    assert harness.is_empty()  # the late elements changed nothing
    assert harness.logic.num_late_records_dropped == 0


def test_without_a_side_output_late_elements_are_dropped_and_counted():
    harness = tumbling_sum()
    harness.advance_watermark(9)
    assert harness.element(2, 9) == []
    assert harness.element(2, 3) == []
    assert harness.logic.num_late_records_dropped == 2
    assert harness.is_empty()


def test_an_element_behind_the_watermark_is_not_late_while_its_window_is_open():
    harness = tumbling_sum(side_output_late_data=True)
    harness.advance_watermark(8)
    assert harness.element(1, 3) == []  # 3 <= 8, but the window ends at 9
    assert results(harness.advance_watermark(9)) == [(1, 9)]


def test_a_window_is_late_exactly_when_its_max_timestamp_is_at_the_watermark():
    harness = tumbling_sum(side_output_late_data=True)
    harness.advance_watermark(8)
    assert harness.element(1, 0) == []
    harness.advance_watermark(9)
    assert late(harness.element(1, 0)) == [(1, 0)]


def test_allowed_lateness_re_fires_the_window_for_each_late_element_until_cleanup():
    harness = tumbling_sum(allowed_lateness=5, side_output_late_data=True)
    harness.element(1, 2)
    harness.element(2, 7)
    assert results(harness.advance_watermark(9)) == [(3, 9)]
    assert results(harness.element(4, 1)) == [(7, 9)]  # fires at once, with all contents
    assert results(harness.advance_watermark(13)) == []
    assert results(harness.element(8, 9)) == [(15, 9)]
    assert harness.advance_watermark(14) == []  # cleanup at 9 + 5: nothing emitted
    assert harness.is_empty()
    assert late(harness.element(16, 9)) == [(16, 9)]


def test_with_allowed_lateness_an_element_is_late_only_past_the_cleanup_time():
    harness = tumbling_sum(allowed_lateness=5, side_output_late_data=True)
    harness.advance_watermark(13)
    assert results(harness.element(1, 0)) == [(1, 9)]  # 9 + 5 > 13: fires at once
    harness.advance_watermark(14)
    assert late(harness.element(2, 0)) == [(2, 0)]


def test_a_sliding_element_with_some_windows_open_is_not_late():
    harness = WindowHarness(
        SlidingEventTimeWindows.of(10, 5), ReducingWindowContents(add), side_output_late_data=True
    )
    harness.advance_watermark(10)  # [0, 10) is over, [5, 15) is not
    assert harness.element(1, 7) == []
    assert [(i.value, i.window) for i in harness.advance_watermark(20)] == [(1, TimeWindow(5, 15))]
    assert late(harness.element(2, 7)) == [(2, 7)]


def test_a_late_session_element_that_merges_nothing_goes_to_the_side_output():
    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(5),
        ListWindowContents(lambda key, ctx, elements: [sorted(elements)]),
        side_output_late_data=True,
    )
    harness.element(1, 10)
    assert results(harness.advance_watermark(20)) == [([1], 14)]
    assert late(harness.element(2, 3)) == [(2, 3)]
    assert harness.is_empty()


def test_a_session_element_behind_the_watermark_that_extends_an_open_session_is_not_late():
    harness = WindowHarness(
        EventTimeSessionWindows.with_gap(10),
        ListWindowContents(lambda key, ctx, elements: [sorted(elements)]),
        side_output_late_data=True,
    )
    harness.element(2, 20)  # [20, 30)
    harness.advance_watermark(25)
    assert harness.element(1, 12) == []  # [12, 22) merges into [12, 30)
    assert results(harness.advance_watermark(29)) == [([1, 2], 29)]


def test_processing_time_and_global_windows_have_no_late_elements():
    processing = WindowHarness(
        TumblingProcessingTimeWindows.of(10),
        ReducingWindowContents(add),
        side_output_late_data=True,
    )
    processing.advance_watermark(1000)
    assert processing.element(1, -5) == []
    assert not any(isinstance(item, LateElement) for item in processing.advance_processing_time(9))

    global_windows = WindowHarness(
        GlobalWindows.create(),
        ReducingWindowContents(add),
        trigger=CountTrigger.of(1),
        side_output_late_data=True,
    )
    global_windows.advance_watermark(2**63 - 1)
    assert results(global_windows.element(1, 0)) == [(1, 2**63 - 1)]


def test_an_element_in_no_window_is_late_only_when_it_is_behind_the_watermark_by_the_lateness():
    # Sliding windows with gaps: 15 to 19 belong to no window of size 5 every 10.
    harness = WindowHarness(
        SlidingEventTimeWindows.of(5, 10),
        ReducingWindowContents(add),
        allowed_lateness=4,
        side_output_late_data=True,
    )
    harness.advance_watermark(19)
    assert harness.element(1, 16) == []  # 16 + 4 > 19: neither in a window nor late
    assert harness.logic.num_late_records_dropped == 0
    assert late(harness.element(2, 15)) == [(2, 15)]  # 15 + 4 <= 19
    assert harness.is_empty()
