"""Properties of WindowLogic over random out-of-order input: tumbling and sliding event-time
sums equal a brute-force computation, and exactly Flink's late records are routed late."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st
from window_harness import WindowHarness

from barrierflow.runtime.watermarks import MIN_WATERMARK
from barrierflow.runtime.windowing import LateElement, ReducingWindowContents, WindowResult
from barrierflow.window import SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows

END_OF_TIME = 2**63 - 1


def keyed_sum(a, b):
    return (a[0], a[1] + b[1])


def brute_force_windows(timestamp: int, size: int, slide: int, offset: int) -> list[TimeWindow]:
    """Every window [start, start + size) with start = offset + n * slide that holds timestamp,
    found by walking all starts from far below (no use of the assigner's arithmetic)."""
    found = []
    start = offset - slide * 1000  # far below any timestamp drawn here
    while start <= timestamp:
        if start <= timestamp < start + size:
            found.append(TimeWindow(start, start + size))
        start += slide
    return found


@st.composite
def windowing(draw):
    if draw(st.booleans()):
        size = draw(st.integers(1, 40))
        slide = size
    else:
        size = draw(st.integers(1, 40))
        slide = draw(st.integers(1, 40))
    offset = draw(st.integers(-(slide - 1), slide - 1))
    return size, slide, offset


events = st.lists(
    st.one_of(
        st.tuples(
            st.just("element"), st.sampled_from("abc"), st.integers(1, 100), st.integers(-60, 160)
        ),
        st.tuples(st.just("watermark"), st.integers(-60, 160)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(windowing=windowing(), lateness=st.sampled_from([0, 0, 1, 7, 25]), events=events)
def test_event_time_window_sums_and_late_records_match_a_brute_force_computation(
    windowing, lateness, events
):
    size, slide, offset = windowing
    if size == slide:
        assigner = TumblingEventTimeWindows.of(size, offset)
    else:
        assigner = SlidingEventTimeWindows.of(size, slide, offset)
    harness = WindowHarness(
        assigner,
        ReducingWindowContents(keyed_sum),
        allowed_lateness=lateness,
        side_output_late_data=True,
    )

    expected_sums: dict[tuple[str, TimeWindow], int] = defaultdict(int)
    expected_late: list[tuple[tuple[str, int], int]] = []
    emitted: list = []
    watermark = MIN_WATERMARK
    for event in events:
        if event[0] == "watermark":
            watermark = max(watermark, event[1])
            emitted += harness.advance_watermark(watermark)
            continue
        _, key, value, timestamp = event
        accepted = [
            window
            for window in brute_force_windows(timestamp, size, slide, offset)
            if window.max_timestamp() + lateness > watermark  # the window is not late yet
        ]
        for window in accepted:
            expected_sums[(key, window)] += value
        if not accepted and timestamp + lateness <= watermark:
            expected_late.append(((key, value), timestamp))
        emitted += harness.element((key, value), timestamp, key=key)
    emitted += harness.advance_watermark(END_OF_TIME)

    late = [(item.value, item.timestamp) for item in emitted if isinstance(item, LateElement)]
    assert late == expected_late

    last_result: dict[tuple[str, TimeWindow], int] = {}
    firings: dict[tuple[str, TimeWindow], int] = defaultdict(int)
    for item in emitted:
        if isinstance(item, WindowResult):
            key, total = item.value
            assert item.timestamp == item.window.max_timestamp()
            last_result[(key, item.window)] = total
            firings[(key, item.window)] += 1
    assert last_result == dict(expected_sums)
    if lateness == 0:
        assert all(count == 1 for count in firings.values())
    assert harness.is_empty()


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(1, 30),
    events=st.lists(
        st.tuples(st.integers(-40, 120), st.integers(-40, 120)), min_size=1, max_size=50
    ),
)
def test_with_no_lateness_a_tumbling_record_is_late_exactly_when_its_window_ended_before_it_came(
    size, events
):
    harness = WindowHarness(
        TumblingEventTimeWindows.of(size),
        ReducingWindowContents(lambda a, b: a + b),
        side_output_late_data=True,
    )
    watermark = MIN_WATERMARK
    for index, (timestamp, next_watermark) in enumerate(events):
        emitted = harness.element(index, timestamp)
        window_end = timestamp - timestamp % size + size
        if window_end - 1 <= watermark:
            assert emitted == [LateElement(index, timestamp)]
            assert timestamp <= watermark  # a late record is always behind the watermark
        else:
            assert emitted == []
        watermark = max(watermark, next_watermark)
        harness.advance_watermark(watermark)
