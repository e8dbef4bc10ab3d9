"""Window assigners: Flink's assignment rules (tumbling, sliding, sessions, global), their
parameters, and the triggers they default to."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow import Duration
from barrierflow.errors import ConfigurationError
from barrierflow.window import (
    CountWindow,
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    NeverTrigger,
    ProcessingTimeSessionWindows,
    ProcessingTimeTrigger,
    SessionWindowTimeGapExtractor,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)


class Clock(WindowAssigner.WindowAssignerContext):
    def __init__(self, now: int) -> None:
        self.now = now

    def get_current_processing_time(self) -> int:
        return self.now


def windows(*pairs: tuple[int, int]) -> list[TimeWindow]:
    return [TimeWindow(start, end) for start, end in pairs]


# ---- tumbling ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assigner", "timestamp", "window"),
    [
        (TumblingEventTimeWindows.of(5000), 0, (0, 5000)),
        (TumblingEventTimeWindows.of(5000), 4999, (0, 5000)),
        (TumblingEventTimeWindows.of(5000), 5000, (5000, 10000)),
        (TumblingEventTimeWindows.of(5000), -1, (-5000, 0)),
        (TumblingEventTimeWindows.of(5000), -5001, (-10000, -5000)),
        (TumblingEventTimeWindows.of(5000, 100), 100, (100, 5100)),
        (TumblingEventTimeWindows.of(5000, 100), 5099, (100, 5100)),
        (TumblingEventTimeWindows.of(5000, 100), 5100, (5100, 10100)),
        (TumblingEventTimeWindows.of(5000, 100), 99, (-4900, 100)),
        (TumblingEventTimeWindows.of(5000, -100), 0, (-100, 4900)),
        (
            TumblingEventTimeWindows.of(Duration.of_seconds(1), Duration.of_millis(100)),
            0,
            (-900, 100),
        ),
    ],
)
def test_tumbling_event_time_windows_follow_flink(assigner, timestamp, window):
    assert assigner.assign_windows("e", timestamp, None) == windows(window)


def test_tumbling_processing_time_windows_use_the_clock_not_the_timestamp():
    assigner = TumblingProcessingTimeWindows.of(Duration.of_seconds(5), 100)
    assert assigner.assign_windows("e", 999_999, Clock(5099)) == windows((100, 5100))
    assert assigner.assign_windows("e", None, Clock(-1)) == windows((-4900, 100))


@pytest.mark.parametrize(
    ("size", "offset"),
    [(-1, 0), (0, 0), (10, 10), (10, 20), (10, -10), (10, -11)],
)
def test_tumbling_windows_refuse_a_size_below_one_or_an_offset_beyond_the_size(size, offset):
    with pytest.raises(ConfigurationError, match="abs\\(offset\\) < size"):
        TumblingEventTimeWindows.of(size, offset)
    with pytest.raises(ConfigurationError, match="abs\\(offset\\) < size"):
        TumblingProcessingTimeWindows.of(size, offset)


def test_sizes_must_be_milliseconds_or_a_duration():
    with pytest.raises(TypeError, match="window size"):
        TumblingEventTimeWindows.of(1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("timestamp", [None, -(2**63)])
def test_event_time_windows_refuse_a_record_without_a_timestamp(timestamp):
    for assigner in (
        TumblingEventTimeWindows.of(10),
        SlidingEventTimeWindows.of(10, 5),
        EventTimeSessionWindows.with_gap(10),
    ):
        with pytest.raises(ConfigurationError, match="no timestamp"):
            assigner.assign_windows("e", timestamp, None)


# ---- sliding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assigner", "timestamp", "expected"),
    [
        (
            SlidingEventTimeWindows.of(5000, 1000),
            0,
            [(0, 5000), (-1000, 4000), (-2000, 3000), (-3000, 2000), (-4000, 1000)],
        ),
        (
            SlidingEventTimeWindows.of(5000, 1000),
            4999,
            [(4000, 9000), (3000, 8000), (2000, 7000), (1000, 6000), (0, 5000)],
        ),
        (
            SlidingEventTimeWindows.of(5000, 1000),
            5000,
            [(5000, 10000), (4000, 9000), (3000, 8000), (2000, 7000), (1000, 6000)],
        ),
        (
            SlidingEventTimeWindows.of(5000, 1000, 100),
            100,
            [(100, 5100), (-900, 4100), (-1900, 3100), (-2900, 2100), (-3900, 1100)],
        ),
        (SlidingEventTimeWindows.of(10, 5), -1, [(-5, 5), (-10, 0)]),
        (SlidingEventTimeWindows.of(10, 3), 0, [(0, 10), (-3, 7), (-6, 4), (-9, 1)]),
        (SlidingEventTimeWindows.of(5, 10), 7, []),
        (SlidingEventTimeWindows.of(5, 10), 3, [(0, 5)]),
    ],
    ids=[
        "start of a slide",
        "end of a window",
        "next window",
        "offset",
        "negative timestamp",
        "slide not dividing size",
        "gap between windows",
        "inside a gapped window",
    ],
)
def test_sliding_event_time_windows_follow_flink_latest_first(assigner, timestamp, expected):
    assert assigner.assign_windows("e", timestamp, None) == windows(*expected)


def test_sliding_processing_time_windows_use_the_clock():
    assigner = SlidingProcessingTimeWindows.of(Duration.of_seconds(5), Duration.of_seconds(1))
    assert assigner.assign_windows("e", 0, Clock(5000)) == windows(
        (5000, 10000), (4000, 9000), (3000, 8000), (2000, 7000), (1000, 6000)
    )


@pytest.mark.parametrize(
    ("size", "slide", "offset"),
    [(-1, 10, 0), (0, 10, 0), (10, -1, 0), (10, 0, 0), (10, 5, 5), (10, 5, -6)],
)
def test_sliding_windows_refuse_bad_parameters(size, slide, offset):
    with pytest.raises(ConfigurationError, match="abs\\(offset\\) < slide and size > 0"):
        SlidingEventTimeWindows.of(size, slide, offset)
    with pytest.raises(ConfigurationError, match="abs\\(offset\\) < slide and size > 0"):
        SlidingProcessingTimeWindows.of(size, slide, offset)


@given(
    timestamp=st.integers(-(10**9), 10**9),
    size=st.integers(1, 200),
    slide=st.integers(1, 200),
    offset_fraction=st.floats(-0.999, 0.999),
)
def test_sliding_windows_are_exactly_the_aligned_windows_holding_the_timestamp(
    timestamp, size, slide, offset_fraction
):
    offset = int(offset_fraction * slide)
    assigned = SlidingEventTimeWindows.of(size, slide, offset).assign_windows("e", timestamp, None)
    # Brute force: every start aligned to the offset whose window holds the timestamp.
    first = timestamp - size - slide
    first -= (first - offset) % slide
    expected = [
        TimeWindow(start, start + size)
        for start in range(first, timestamp + 1, slide)
        if start <= timestamp < start + size
    ]
    assert sorted(assigned) == expected
    assert assigned == sorted(assigned, reverse=True)


# ---- sessions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("timestamp", "window"), [(0, (0, 5000)), (4999, (4999, 9999)), (-3, (-3, 4997))]
)
def test_event_time_sessions_open_a_window_of_the_gap_at_the_timestamp(timestamp, window):
    assigner = EventTimeSessionWindows.with_gap(Duration.of_seconds(5))
    assert assigner.assign_windows("e", timestamp, None) == windows(window)
    assert assigner.is_merging() and assigner.is_event_time()


def test_processing_time_sessions_open_a_window_at_the_clock():
    assigner = ProcessingTimeSessionWindows.with_gap(5000)
    assert assigner.assign_windows("e", 1, Clock(100)) == windows((100, 5100))
    assert assigner.is_merging() and not assigner.is_event_time()


@pytest.mark.parametrize("gap", [0, -1])
def test_sessions_refuse_a_gap_below_one(gap):
    with pytest.raises(ConfigurationError, match="0 < size"):
        EventTimeSessionWindows.with_gap(gap)
    with pytest.raises(ConfigurationError, match="0 < size"):
        ProcessingTimeSessionWindows.with_gap(gap)


def test_sessions_merge_overlapping_windows_through_the_callback():
    merges = []

    class Callback:
        def merge(self, to_be_merged, merge_result):
            merges.append((sorted(to_be_merged), merge_result))

    EventTimeSessionWindows.with_gap(3).merge_windows(
        windows((0, 3), (2, 5), (9, 12), (20, 23), (12, 15)), Callback()
    )
    assert merges == [
        (windows((0, 3), (2, 5)), TimeWindow(0, 5)),
        (windows((9, 12), (12, 15)), TimeWindow(9, 15)),
    ]


class GapFromElement(SessionWindowTimeGapExtractor):
    def extract(self, element):
        return element["gap"]


def test_dynamic_session_gaps_come_from_each_element():
    assigner = EventTimeSessionWindows.with_dynamic_gap(GapFromElement())
    assert isinstance(assigner, DynamicEventTimeSessionWindows)
    assert assigner.assign_windows({"gap": 7}, 10, None) == windows((10, 17))
    assert assigner.assign_windows({"gap": Duration.of_seconds(1)}, 10, None) == windows((10, 1010))
    by_callable = ProcessingTimeSessionWindows.with_dynamic_gap(lambda element: element)
    assert by_callable.assign_windows(30, 0, Clock(100)) == windows((100, 130))
    assert by_callable.is_merging()


@pytest.mark.parametrize("gap", [0, -5])
def test_a_dynamic_gap_below_one_is_refused_when_the_element_comes(gap):
    assigner = EventTimeSessionWindows.with_dynamic_gap(lambda element: gap)
    with pytest.raises(ConfigurationError, match="0 < gap"):
        assigner.assign_windows("e", 0, None)


# ---- global and defaults ------------------------------------------------------------------


def test_global_windows_put_everything_in_the_global_window():
    assigner = GlobalWindows.create()
    assert assigner.assign_windows("e", 123, None) == [GlobalWindow.get()]
    assert not assigner.is_event_time() and not assigner.is_merging()


@pytest.mark.parametrize(
    ("assigner", "trigger", "event_time", "merging"),
    [
        (TumblingEventTimeWindows.of(10), EventTimeTrigger, True, False),
        (SlidingEventTimeWindows.of(10, 5), EventTimeTrigger, True, False),
        (EventTimeSessionWindows.with_gap(10), EventTimeTrigger, True, True),
        (EventTimeSessionWindows.with_dynamic_gap(lambda e: 1), EventTimeTrigger, True, True),
        (TumblingProcessingTimeWindows.of(10), ProcessingTimeTrigger, False, False),
        (SlidingProcessingTimeWindows.of(10, 5), ProcessingTimeTrigger, False, False),
        (ProcessingTimeSessionWindows.with_gap(10), ProcessingTimeTrigger, False, True),
        (GlobalWindows.create(), NeverTrigger, False, False),
    ],
    # ids the same in every process (xdist workers compare them): no memory addresses
    ids=lambda v: str(v) if isinstance(v, bool) else getattr(v, "__name__", type(v).__name__),
)
def test_each_assigner_has_flinks_default_trigger_and_time_domain(
    assigner, trigger, event_time, merging
):
    assert type(assigner.get_default_trigger()) is trigger
    assert assigner.get_default_trigger(env=object()) is not None  # PyFlink passes the env
    assert assigner.is_event_time() is event_time
    assert assigner.is_merging() is merging


def test_processing_time_windows_need_a_clock():
    with pytest.raises(ConfigurationError, match="processing time"):
        TumblingProcessingTimeWindows.of(10).assign_windows("e", 0, None)


def test_the_window_module_exports_every_public_window_class():
    import barrierflow.window as window
    from barrierflow.core.windows import assigners, count_assigners, serializers, sessions, triggers
    from barrierflow.core.windows import window as windows

    # The window model's own names that PyFlink has not: not part of the public path.
    internal = {
        "MergeCallback",
        "SessionWindows",
        "event_timestamp",
        "processing_time",
        "sliding_window_ids",
    }
    modules = (windows, assigners, count_assigners, sessions, triggers, serializers)
    defined = {name for module in modules for name in module.__all__}
    assert (defined - internal) | {"MAX_TIMESTAMP"} == set(window.__all__)


def test_windows_pickle_under_their_public_path_as_savepoints_name_them():
    import pickle

    assert b"barrierflow.window" in pickle.dumps(TimeWindow(0, 10))
    assert b"barrierflow.window" in pickle.dumps(GlobalWindow.get())
    assert pickle.loads(pickle.dumps(GlobalWindow.get())) is GlobalWindow.get()


PICKLED_BEFORE = {
    TimeWindow(5, 10): b"\x80\x05\x951\x00\x00\x00\x00\x00\x00\x00\x8c\x12barrierflow.window"
    b"\x94\x8c\nTimeWindow\x94\x93\x94)\x81\x94]\x94(K\x05K\neb.",
    CountWindow(3): b"\x80\x05\x95/\x00\x00\x00\x00\x00\x00\x00\x8c\x12barrierflow.window"
    b"\x94\x8c\x0bCountWindow\x94\x93\x94)\x81\x94]\x94K\x03ab.",
}
"""Windows as savepoints before this release pickled them (the dataclass's own state)."""


@pytest.mark.parametrize("window", list(PICKLED_BEFORE), ids=repr)
def test_windows_pickle_as_a_call_and_read_their_earlier_pickles(window):
    """A window pickles as a call of its class (cheaper to write and read than a slotted
    dataclass's state, which takes a Python-level `fields()` per window) and savepoints
    written before still read."""
    import pickle

    assert pickle.loads(PICKLED_BEFORE[window]) == window
    assert pickle.loads(pickle.dumps(window, 5)) == window
    assert len(pickle.dumps(window, 5)) < len(PICKLED_BEFORE[window])
    assert b"barrierflow.window" in pickle.dumps(window, 5)


@pytest.mark.parametrize(
    ("assigner", "text"),
    [
        (EventTimeSessionWindows.with_gap(10), "EventTimeSessionWindows(10)"),
        (ProcessingTimeSessionWindows.with_gap(10), "ProcessingTimeSessionWindows(10)"),
    ],
)
def test_static_session_assigners_show_their_gap(assigner, text):
    assert repr(assigner) == text
