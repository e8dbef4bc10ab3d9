"""MergingWindowSet: every case of Flink's MergingWindowSetTest, plus the one deliberate
deviation (re-adding a merged window keeps its state window)."""

from __future__ import annotations

import pytest

from barrierflow.runtime.windowing.merging_window_set import MergingWindowSet
from barrierflow.window import EventTimeSessionWindows, MergingWindowAssigner, TimeWindow


def W(start: int, end: int) -> TimeWindow:
    return TimeWindow(start, end)


class RecordingMergeFunction:
    """Records the one merge an `add_window` may cause (a second one fails the test)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> RecordingMergeFunction:
        self.target = None
        self.sources = None
        self.state_window = None
        self.merged_state_windows = None
        return self

    def has_merged(self) -> bool:
        return self.target is not None

    def __call__(self, merge_result, merged_windows, state_window_result, merged_state_windows):
        assert self.target is None, "More than one merge for adding a Window should not occur."
        self.target = merge_result
        self.sources = list(merged_windows)
        self.state_window = state_window_result
        self.merged_state_windows = list(merged_state_windows)


class NonEagerlyMergingWindowAssigner(MergingWindowAssigner):
    """Flink's misbehaving test assigner: it merges windows that do not overlap the new one."""

    def __init__(self, session_timeout: int) -> None:
        self.session_timeout = session_timeout

    def assign_windows(self, element, timestamp, context):
        return [TimeWindow(timestamp, timestamp + self.session_timeout)]

    def get_default_trigger(self, env=None):
        raise NotImplementedError

    def is_event_time(self):
        return True

    def merge_windows(self, windows, callback):
        windows = list(windows)
        earliest = min(windows, key=lambda w: w.start)
        associated = [w for w in windows if earliest.start <= w.start < earliest.end]
        if len(associated) > 1:
            callback.merge(associated, TimeWindow(earliest.start, earliest.end + 1))


def sessions() -> MergingWindowSet:
    return MergingWindowSet(EventTimeSessionWindows.with_gap(3))


def test_non_eager_merging_keeps_every_added_window_in_flight():
    window_set = MergingWindowSet(NonEagerlyMergingWindowAssigner(3000))
    merge = RecordingMergeFunction()
    for window in [W(0, 2), W(2, 5), W(1, 2), W(10, 12)]:
        result = window_set.add_window(window, merge.reset())
        assert window_set.get_state_window(result) is not None


def test_incremental_merging_keeps_the_first_state_window():
    window_set, merge = sessions(), RecordingMergeFunction()

    assert window_set.add_window(W(0, 4), merge.reset()) == W(0, 4)
    assert not merge.has_merged()
    assert window_set.get_state_window(W(0, 4)) == W(0, 4)

    # add some more windows
    assert window_set.add_window(W(0, 4), merge.reset()) == W(0, 4)
    assert not merge.has_merged()

    assert window_set.add_window(W(3, 5), merge.reset()) == W(0, 5)
    assert merge.has_merged()
    assert merge.target == W(0, 5)
    assert merge.state_window == W(0, 4)
    assert merge.sources == [W(0, 4)]
    assert merge.merged_state_windows == []

    assert window_set.add_window(W(4, 6), merge.reset()) == W(0, 6)
    assert merge.has_merged()
    assert merge.target == W(0, 6)
    assert merge.state_window == W(0, 4)
    assert merge.sources == [W(0, 5)]
    assert merge.merged_state_windows == []
    assert window_set.get_state_window(W(0, 6)) == W(0, 4)

    # add some windows that fall into the already merged region
    for window in [W(1, 4), W(0, 4), W(3, 5), W(4, 6)]:
        assert window_set.add_window(window, merge.reset()) == W(0, 6)
        assert not merge.has_merged()
    assert window_set.get_state_window(W(0, 6)) == W(0, 4)

    # add some more windows that don't merge with the first bunch
    assert window_set.add_window(W(11, 14), merge.reset()) == W(11, 14)
    assert not merge.has_merged()
    assert window_set.get_state_window(W(0, 6)) == W(0, 4)
    assert window_set.get_state_window(W(11, 14)) == W(11, 14)

    # add some more windows that merge with the second bunch
    assert window_set.add_window(W(10, 13), merge.reset()) == W(10, 14)
    assert merge.has_merged()
    assert merge.target == W(10, 14)
    assert merge.state_window == W(11, 14)
    assert merge.sources == [W(11, 14)]
    assert merge.merged_state_windows == []

    assert window_set.add_window(W(12, 15), merge.reset()) == W(10, 15)
    assert merge.has_merged()
    assert merge.target == W(10, 15)
    assert merge.state_window == W(11, 14)
    assert merge.sources == [W(10, 14)]
    assert merge.merged_state_windows == []

    assert window_set.add_window(W(11, 14), merge.reset()) == W(10, 15)
    assert not merge.has_merged()

    assert window_set.get_state_window(W(0, 6)) == W(0, 4)
    assert window_set.get_state_window(W(10, 15)) == W(11, 14)

    # retire the first batch of windows
    window_set.retire_window(W(0, 6))
    assert window_set.get_state_window(W(0, 6)) is None
    assert window_set.get_state_window(W(10, 15)) == W(11, 14)


def test_late_merging_joins_windows_that_were_apart():
    window_set, merge = sessions(), RecordingMergeFunction()

    # add several non-overlapping initial windows
    for window in [W(0, 3), W(5, 8), W(10, 13)]:
        assert window_set.add_window(window, merge.reset()) == window
        assert not merge.has_merged()
        assert window_set.get_state_window(window) == window

    # add a window that merges the later two windows
    assert window_set.add_window(W(8, 10), merge.reset()) == W(5, 13)
    assert merge.has_merged()
    assert merge.target == W(5, 13)
    assert merge.state_window in (W(5, 8), W(10, 13))
    assert sorted(merge.sources) == [W(5, 8), W(10, 13)]
    assert merge.merged_state_windows in ([W(10, 13)], [W(5, 8)])
    assert merge.target not in merge.merged_state_windows
    assert {merge.state_window, *merge.merged_state_windows} == {W(5, 8), W(10, 13)}
    assert window_set.get_state_window(W(0, 3)) == W(0, 3)

    for window in [W(5, 8), W(8, 10), W(10, 13)]:
        assert window_set.add_window(window, merge.reset()) == W(5, 13)
        assert not merge.has_merged()
    assert window_set.get_state_window(W(5, 13)) in (W(5, 8), W(10, 13))

    # add a window that merges all of them together
    assert window_set.add_window(W(3, 5), merge.reset()) == W(0, 13)
    assert merge.has_merged()
    assert merge.target == W(0, 13)
    assert merge.state_window in (W(0, 3), W(5, 8), W(10, 13))
    assert sorted(merge.sources) == [W(0, 3), W(5, 13)]
    assert len(merge.merged_state_windows) == 1
    assert merge.merged_state_windows[0] in (W(0, 3), W(5, 8), W(10, 13))
    assert merge.target not in merge.merged_state_windows
    assert window_set.get_state_window(W(0, 13)) in (W(0, 3), W(5, 8), W(10, 13))


def test_a_large_new_window_covering_one_window_takes_its_state_window():
    window_set, merge = sessions(), RecordingMergeFunction()
    assert window_set.add_window(W(1, 2), merge.reset()) == W(1, 2)
    assert not merge.has_merged()
    assert window_set.get_state_window(W(1, 2)) == W(1, 2)

    assert window_set.add_window(W(0, 3), merge.reset()) == W(0, 3)
    assert merge.has_merged()
    assert window_set.get_state_window(W(0, 3)) == W(1, 2)


def test_adding_identical_windows_does_not_merge():
    window_set, merge = sessions(), RecordingMergeFunction()
    for _ in range(2):
        assert window_set.add_window(W(1, 2), merge.reset()) == W(1, 2)
        assert not merge.has_merged()
        assert window_set.get_state_window(W(1, 2)) == W(1, 2)


def test_a_large_new_window_covering_several_windows_merges_their_state_windows():
    window_set, merge = sessions(), RecordingMergeFunction()
    for window in [W(1, 3), W(5, 8), W(10, 13)]:
        assert window_set.add_window(window, merge.reset()) == window
        assert not merge.has_merged()
        assert window_set.get_state_window(window) == window

    assert window_set.add_window(W(0, 13), merge.reset()) == W(0, 13)
    assert merge.has_merged()
    assert len(merge.merged_state_windows) == 2
    kept = window_set.get_state_window(W(0, 13))
    assert kept in (W(1, 3), W(5, 8), W(10, 13))
    assert {kept, *merge.merged_state_windows} == {W(1, 3), W(5, 8), W(10, 13)}


def test_the_set_restores_from_plain_pairs():
    window_set = MergingWindowSet(
        EventTimeSessionWindows.with_gap(3), [(W(17, 42), W(42, 17)), (W(1, 2), W(3, 4))]
    )
    assert window_set.get_state_window(W(17, 42)) == W(42, 17)
    assert window_set.get_state_window(W(1, 2)) == W(3, 4)


def test_the_snapshot_holds_every_in_flight_window_and_restores_the_same_set():
    window_set, merge = sessions(), RecordingMergeFunction()
    window_set.add_window(W(1, 2), merge.reset())
    window_set.add_window(W(17, 42), merge.reset())
    assert window_set.get_state_window(W(1, 2)) == W(1, 2)
    assert window_set.get_state_window(W(17, 42)) == W(17, 42)
    assert window_set.changed()

    snapshot = window_set.snapshot()
    assert sorted(snapshot) == [(W(1, 2), W(1, 2)), (W(17, 42), W(17, 42))]
    restored = MergingWindowSet(EventTimeSessionWindows.with_gap(3), snapshot)
    assert sorted(restored.snapshot()) == sorted(snapshot)


def test_a_restored_set_that_did_not_change_need_not_be_written_back():
    window_set = MergingWindowSet(
        EventTimeSessionWindows.with_gap(3), [(W(17, 42), W(42, 17)), (W(1, 2), W(3, 4))]
    )
    assert window_set.get_state_window(W(17, 42)) == W(42, 17)
    assert not window_set.changed()
    window_set.retire_window(W(1, 2))
    assert window_set.changed()


def test_retiring_a_window_that_is_not_in_flight_is_an_error():
    with pytest.raises(ValueError, match="not in in-flight window set"):
        sessions().retire_window(W(0, 3))


def test_re_adding_a_merged_window_keeps_its_state_window():
    # Deliberate deviation from Flink, whose addWindow maps the window to itself here and so
    # orphans the contents kept in (1, 2). Reachable with dynamic session gaps.
    window_set, merge = sessions(), RecordingMergeFunction()
    window_set.add_window(W(1, 2), merge.reset())
    assert window_set.add_window(W(0, 3), merge.reset()) == W(0, 3)
    assert window_set.get_state_window(W(0, 3)) == W(1, 2)

    assert window_set.add_window(W(0, 3), merge.reset()) == W(0, 3)
    assert not merge.has_merged()
    assert window_set.get_state_window(W(0, 3)) == W(1, 2)
