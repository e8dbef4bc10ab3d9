"""TimeWindow and GlobalWindow: Flink's window arithmetic, including negative timestamps."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow.window import MAX_TIMESTAMP, GlobalWindow, TimeWindow


class RecordingCallback:
    def __init__(self) -> None:
        self.merges: list[tuple[set[TimeWindow], TimeWindow]] = []

    def merge(self, to_be_merged, merge_result) -> None:
        self.merges.append((set(to_be_merged), merge_result))


def test_a_time_window_ends_one_millisecond_before_its_end():
    assert TimeWindow(0, 10).max_timestamp() == 9
    assert TimeWindow(-10, 0).max_timestamp() == -1


@pytest.mark.parametrize(
    ("a", "b", "intersects"),
    [
        pytest.param((0, 10), (5, 15), True, id="overlapping"),
        pytest.param((0, 10), (10, 20), True, id="touching"),
        pytest.param((0, 10), (11, 20), False, id="apart"),
        pytest.param((0, 10), (2, 3), True, id="covering"),
    ],
)
def test_windows_intersect_when_they_overlap_or_touch(a, b, intersects):
    assert TimeWindow(*a).intersects(TimeWindow(*b)) is intersects
    assert TimeWindow(*b).intersects(TimeWindow(*a)) is intersects


def test_cover_is_the_smallest_window_holding_both():
    assert TimeWindow(0, 10).cover(TimeWindow(5, 15)) == TimeWindow(0, 15)
    assert TimeWindow(5, 6).cover(TimeWindow(0, 2)) == TimeWindow(0, 6)


@pytest.mark.parametrize(
    ("timestamp", "offset", "size", "start"),
    [
        (0, 0, 5000, 0),
        (4999, 0, 5000, 0),
        (5000, 0, 5000, 5000),
        (-1, 0, 5000, -5000),
        (-5000, 0, 5000, -5000),
        (-5001, 0, 5000, -10000),
        (100, 100, 5000, 100),
        (99, 100, 5000, -4900),
        (0, -100, 5000, -100),
        (4900, -100, 5000, 4900),
        (-7, 3, 5, -7),
        (-8, 3, 5, -12),
    ],
)
def test_window_start_with_offset_matches_flink_for_any_sign(timestamp, offset, size, start):
    assert TimeWindow.get_window_start_with_offset(timestamp, offset, size) == start


@given(
    timestamp=st.integers(-(10**12), 10**12),
    size=st.integers(1, 10**6),
    offset_fraction=st.floats(-0.999, 0.999),
)
def test_the_window_start_is_aligned_and_holds_the_timestamp(timestamp, size, offset_fraction):
    offset = int(offset_fraction * size)
    start = TimeWindow.get_window_start_with_offset(timestamp, offset, size)
    assert start <= timestamp < start + size
    assert (start - offset) % size == 0


def test_merge_windows_merges_consecutive_and_touching_windows():
    callback = RecordingCallback()
    windows = [TimeWindow(*w) for w in [(0, 1), (1, 2), (2, 3), (4, 5), (5, 6)]]
    TimeWindow.merge_windows(windows, callback)
    assert callback.merges == [
        ({TimeWindow(0, 1), TimeWindow(1, 2), TimeWindow(2, 3)}, TimeWindow(0, 3)),
        ({TimeWindow(4, 5), TimeWindow(5, 6)}, TimeWindow(4, 6)),
    ]


def test_merge_windows_merges_covering_windows():
    callback = RecordingCallback()
    windows = [TimeWindow(*w) for w in [(1, 1), (0, 2), (4, 7), (5, 6)]]
    TimeWindow.merge_windows(windows, callback)
    assert callback.merges == [
        ({TimeWindow(1, 1), TimeWindow(0, 2)}, TimeWindow(0, 2)),
        ({TimeWindow(4, 7), TimeWindow(5, 6)}, TimeWindow(4, 7)),
    ]


@pytest.mark.parametrize(
    "windows",
    [
        pytest.param([(0, 0)], id="a single point window"),
        pytest.param([(0, 1)], id="a single window"),
        pytest.param([(0, 1), (3, 4)], id="windows apart"),
        pytest.param([(0, 1), (0, 1)], id="the same window twice"),
    ],
)
def test_merge_windows_reports_nothing_when_nothing_merges(windows):
    callback = RecordingCallback()
    TimeWindow.merge_windows([TimeWindow(*w) for w in windows], callback)
    assert callback.merges == []


def test_time_windows_are_values_that_pickle():
    window = TimeWindow(-5, 5)
    assert pickle.loads(pickle.dumps(window)) == window
    assert hash(pickle.loads(pickle.dumps(window))) == hash(window)
    assert sorted([TimeWindow(5, 6), TimeWindow(0, 9), TimeWindow(0, 3)]) == [
        TimeWindow(0, 3),
        TimeWindow(0, 9),
        TimeWindow(5, 6),
    ]


def test_the_global_window_is_one_window_that_never_ends():
    assert GlobalWindow.get() is GlobalWindow()
    assert GlobalWindow.get().max_timestamp() == MAX_TIMESTAMP
    assert pickle.loads(pickle.dumps(GlobalWindow.get())) is GlobalWindow.get()
