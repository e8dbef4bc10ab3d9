"""Triggers, event by event, against a fake trigger context that records timers and keeps
per-window state (Flink's trigger tests: EventTimeTriggerTest, CountTriggerTest, ...)."""

from __future__ import annotations

import pytest

from barrierflow.errors import ConfigurationError
from barrierflow.runtime.watermarks import MIN_WATERMARK
from barrierflow.runtime.windowing.partitioned_state import merge_namespaces, partitioned_state
from barrierflow.runtime.windowing.window_state import InMemoryWindowState
from barrierflow.window import (
    ContinuousEventTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    TimeWindow,
    Trigger,
    TriggerResult,
)

CONTINUE = TriggerResult.CONTINUE
FIRE = TriggerResult.FIRE
PURGE = TriggerResult.PURGE
FIRE_AND_PURGE = TriggerResult.FIRE_AND_PURGE


class FakeTriggerContext(Trigger.OnMergeContext):
    """Timers as sets of (window, time); state in an InMemoryWindowState under key None."""

    def __init__(self, watermark: int = MIN_WATERMARK, processing_time: int = 0) -> None:
        self.watermark = watermark
        self.processing_time = processing_time
        self.window: TimeWindow | None = None
        self.merged_windows: list[TimeWindow] = []
        self.event_timers: set[tuple[TimeWindow, int]] = set()
        self.processing_timers: set[tuple[TimeWindow, int]] = set()
        self.state = InMemoryWindowState()

    def at(self, window: TimeWindow) -> FakeTriggerContext:
        self.window = window
        return self

    def fire_event_timer(self, window: TimeWindow, time: int) -> FakeTriggerContext:
        """The timer service fires (and so removes) a registered event-time timer."""
        self.event_timers.remove((window, time))
        return self.at(window)

    def get_current_watermark(self) -> int:
        return self.watermark

    def get_current_processing_time(self) -> int:
        return self.processing_time

    def register_event_time_timer(self, time: int) -> None:
        self.event_timers.add((self.window, time))

    def register_processing_time_timer(self, time: int) -> None:
        self.processing_timers.add((self.window, time))

    def delete_event_time_timer(self, time: int) -> None:
        self.event_timers.discard((self.window, time))

    def delete_processing_time_timer(self, time: int) -> None:
        self.processing_timers.discard((self.window, time))

    def get_partitioned_state(self, state_descriptor):
        return partitioned_state(self.state, state_descriptor, None, self.window)

    def merge_partitioned_state(self, state_descriptor) -> None:
        merge_namespaces(self.state, state_descriptor, None, self.window, self.merged_windows)


W1 = TimeWindow(0, 2)
W2 = TimeWindow(2, 4)


@pytest.mark.parametrize(
    ("result", "fire", "purge"),
    [
        (CONTINUE, False, False),
        (FIRE, True, False),
        (PURGE, False, True),
        (FIRE_AND_PURGE, True, True),
    ],
)
def test_trigger_results_say_whether_to_fire_and_whether_to_purge(result, fire, purge):
    assert result.is_fire() is fire
    assert result.is_purge() is purge


# ---- EventTimeTrigger ----------------------------------------------------------------------


def test_event_time_trigger_registers_a_timer_at_the_window_end_and_fires_on_it():
    trigger, ctx = EventTimeTrigger.create(), FakeTriggerContext()
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_element("e", 2, W2, ctx.at(W2)) is CONTINUE
    assert ctx.event_timers == {(W1, 1), (W2, 3)}
    assert ctx.processing_timers == set()

    assert trigger.on_event_time(1, W1, ctx.at(W1)) is FIRE
    assert trigger.on_event_time(2, W2, ctx.at(W2)) is CONTINUE  # not its end
    assert trigger.on_event_time(3, W2, ctx.at(W2)) is FIRE
    assert trigger.on_processing_time(3, W2, ctx.at(W2)) is CONTINUE

    trigger.clear(W1, ctx.at(W1))
    assert ctx.event_timers == {(W2, 3)}
    trigger.clear(W2, ctx.at(W2))
    assert ctx.event_timers == set()


def test_event_time_trigger_fires_at_once_for_a_window_the_watermark_passed():
    trigger, ctx = EventTimeTrigger.create(), FakeTriggerContext(watermark=1)
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is FIRE
    assert ctx.event_timers == set()
    assert trigger.on_element("e", 2, W2, ctx.at(W2)) is CONTINUE  # 3 > 1
    assert ctx.event_timers == {(W2, 3)}


def test_event_time_trigger_on_merge_registers_the_end_only_if_the_watermark_is_before_it():
    trigger = EventTimeTrigger.create()
    assert trigger.can_merge()
    ctx = FakeTriggerContext(watermark=2)
    trigger.on_merge(TimeWindow(0, 4), ctx.at(TimeWindow(0, 4)))
    assert ctx.event_timers == {(TimeWindow(0, 4), 3)}
    ctx = FakeTriggerContext(watermark=3)
    trigger.on_merge(TimeWindow(0, 4), ctx.at(TimeWindow(0, 4)))
    assert ctx.event_timers == set()


# ---- ProcessingTimeTrigger -----------------------------------------------------------------


def test_processing_time_trigger_fires_on_its_processing_time_timer_only():
    trigger, ctx = ProcessingTimeTrigger.create(), FakeTriggerContext()
    assert trigger.on_element("e", 999, W1, ctx.at(W1)) is CONTINUE
    assert ctx.processing_timers == {(W1, 1)}
    assert ctx.event_timers == set()
    assert trigger.on_event_time(1, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_processing_time(1, W1, ctx.at(W1)) is FIRE
    trigger.clear(W1, ctx.at(W1))
    assert ctx.processing_timers == set()


def test_processing_time_trigger_on_merge_registers_the_end_only_if_the_clock_is_before_it():
    trigger = ProcessingTimeTrigger.create()
    ctx = FakeTriggerContext(processing_time=2)
    trigger.on_merge(TimeWindow(0, 4), ctx.at(TimeWindow(0, 4)))
    assert ctx.processing_timers == {(TimeWindow(0, 4), 3)}
    ctx = FakeTriggerContext(processing_time=3)
    trigger.on_merge(TimeWindow(0, 4), ctx.at(TimeWindow(0, 4)))
    assert ctx.processing_timers == set()


# ---- CountTrigger --------------------------------------------------------------------------


def test_count_trigger_fires_every_n_elements_per_window():
    trigger, ctx = CountTrigger.of(3), FakeTriggerContext()
    steps = [
        (W1, CONTINUE),
        (W1, CONTINUE),
        (W2, CONTINUE),
        (W1, FIRE),  # third of W1
        (W2, CONTINUE),
        (W1, CONTINUE),  # the count started again
        (W2, FIRE),
    ]
    for window, expected in steps:
        assert trigger.on_element("e", 0, window, ctx.at(window)) is expected
    assert ctx.event_timers == set() and ctx.processing_timers == set()
    assert trigger.on_event_time(1, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_processing_time(1, W1, ctx.at(W1)) is CONTINUE


def test_count_trigger_clear_forgets_the_count():
    trigger, ctx = CountTrigger.of(2), FakeTriggerContext()
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE
    trigger.clear(W1, ctx.at(W1))
    assert len(ctx.state) == 0
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE


def test_count_trigger_on_merge_adds_the_counts_of_the_merged_windows():
    trigger, ctx = CountTrigger.of(4), FakeTriggerContext()
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_element("e", 0, W2, ctx.at(W2)) is CONTINUE
    assert trigger.on_element("e", 0, W2, ctx.at(W2)) is CONTINUE
    merged = TimeWindow(0, 4)
    ctx.merged_windows = [W1, W2]
    trigger.on_merge(merged, ctx.at(merged))
    assert trigger.on_element("e", 0, merged, ctx.at(merged)) is FIRE  # 1 + 2 + 1


# ---- PurgingTrigger ------------------------------------------------------------------------


def test_purging_trigger_turns_fire_into_fire_and_purge():
    trigger, ctx = PurgingTrigger.of(CountTrigger.of(2)), FakeTriggerContext()
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is FIRE_AND_PURGE

    event_time = PurgingTrigger.of(EventTimeTrigger.create())
    assert event_time.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE
    assert ctx.event_timers == {(W1, 1)}
    assert event_time.on_event_time(1, W1, ctx.at(W1)) is FIRE_AND_PURGE
    assert event_time.on_event_time(0, W1, ctx.at(W1)) is CONTINUE

    processing_time = PurgingTrigger.of(ProcessingTimeTrigger.create())
    assert processing_time.on_processing_time(1, W1, ctx.at(W1)) is FIRE_AND_PURGE


def test_purging_trigger_delegates_clear_and_merging():
    trigger, ctx = PurgingTrigger.of(EventTimeTrigger.create()), FakeTriggerContext()
    trigger.on_element("e", 0, W1, ctx.at(W1))
    trigger.clear(W1, ctx.at(W1))
    assert ctx.event_timers == set()
    assert trigger.can_merge()
    trigger.on_merge(W2, ctx.at(W2))
    assert ctx.event_timers == {(W2, 3)}

    class NotMerging(NeverTrigger):
        def can_merge(self):
            return False

    assert not PurgingTrigger.of(NotMerging()).can_merge()


# ---- ContinuousEventTimeTrigger ------------------------------------------------------------


def test_continuous_event_time_trigger_fires_every_interval_and_at_the_end():
    trigger, ctx = ContinuousEventTimeTrigger.of(5), FakeTriggerContext()
    window = TimeWindow(0, 20)
    assert trigger.on_element("e", 3, window, ctx.at(window)) is CONTINUE
    assert ctx.event_timers == {(window, 19), (window, 5)}
    assert trigger.on_element("e", 12, window, ctx.at(window)) is CONTINUE  # 5 still pending
    assert ctx.event_timers == {(window, 19), (window, 5)}

    assert trigger.on_event_time(5, window, ctx.fire_event_timer(window, 5)) is FIRE
    assert ctx.event_timers == {(window, 19), (window, 10)}
    assert trigger.on_event_time(7, window, ctx.at(window)) is CONTINUE  # no timer of its own
    assert trigger.on_event_time(10, window, ctx.fire_event_timer(window, 10)) is FIRE
    assert ctx.event_timers == {(window, 19), (window, 15)}
    assert trigger.on_event_time(15, window, ctx.fire_event_timer(window, 15)) is FIRE
    assert ctx.event_timers == {(window, 19)}  # min(15 + 5, 19) is the end timer itself
    assert trigger.on_event_time(19, window, ctx.fire_event_timer(window, 19)) is FIRE

    trigger.clear(window, ctx.at(window))
    assert len(ctx.state) == 0


def test_continuous_event_time_trigger_aligns_negative_timestamps_like_java():
    trigger, ctx = ContinuousEventTimeTrigger.of(5), FakeTriggerContext()
    window = TimeWindow(-20, 0)
    trigger.on_element("e", -3, window, ctx.at(window))
    # Java: -3 - (-3 % 5) = -3 - (-3) = 0, then min(0 + 5, -1) = -1.
    assert ctx.event_timers == {(window, -1)}


def test_continuous_event_time_trigger_clear_deletes_its_pending_timer():
    trigger, ctx = ContinuousEventTimeTrigger.of(5), FakeTriggerContext()
    window = TimeWindow(0, 20)
    trigger.on_element("e", 3, window, ctx.at(window))
    trigger.clear(window, ctx.at(window))
    assert ctx.event_timers == {(window, 19)}  # the end timer is the window operator's
    assert len(ctx.state) == 0


def test_continuous_event_time_trigger_on_merge_keeps_the_earliest_fire_time():
    trigger, ctx = ContinuousEventTimeTrigger.of(5), FakeTriggerContext()
    a, b, merged = TimeWindow(0, 20), TimeWindow(10, 30), TimeWindow(0, 30)
    trigger.on_element("e", 3, a, ctx.at(a))  # next fire at 5
    trigger.on_element("e", 13, b, ctx.at(b))  # next fire at 15
    ctx.merged_windows = [a, b]
    trigger.on_merge(merged, ctx.at(merged))
    assert (merged, 5) in ctx.event_timers
    assert trigger.on_event_time(5, merged, ctx.at(merged)) is FIRE


def test_continuous_event_time_trigger_refuses_a_non_positive_interval():
    with pytest.raises(ConfigurationError):
        ContinuousEventTimeTrigger.of(0)


# ---- the base class and NeverTrigger -------------------------------------------------------


def test_never_trigger_never_fires():
    trigger, ctx = NeverTrigger(), FakeTriggerContext()
    assert trigger.on_element("e", 0, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_event_time(1, W1, ctx.at(W1)) is CONTINUE
    assert trigger.on_processing_time(1, W1, ctx.at(W1)) is CONTINUE
    assert ctx.event_timers == set() and ctx.processing_timers == set()


def test_a_custom_trigger_cannot_merge_unless_it_says_so():
    class FireAlways(Trigger):
        def on_element(self, element, timestamp, window, ctx):
            return FIRE

        def on_event_time(self, time, window, ctx):
            return CONTINUE

        def on_processing_time(self, time, window, ctx):
            return CONTINUE

        def clear(self, window, ctx):
            pass

    trigger = FireAlways()
    assert not trigger.can_merge()
    with pytest.raises(ConfigurationError, match="does not support merging"):
        trigger.on_merge(W1, FakeTriggerContext())
