"""KeyedProcessFunctionHarness, event by event: keyed state, timers in both time domains,
side outputs, inspection, snapshot/restore (also 2 -> 3 and 3 -> 1 subtasks, matching an
uninterrupted run), on the heap and the RocksDB backend."""

from __future__ import annotations

import pytest

from barrierflow import EmbeddedRocksDBStateBackend, HashMapStateBackend, OutputTag
from barrierflow.functions import KeyedProcessFunction, TimeDomain
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor
from barrierflow.testing import HarnessSnapshot, KeyedProcessFunctionHarness, ParallelHarness

BIG = OutputTag("big")
TOTAL = ValueStateDescriptor("total")
SEEN = ListStateDescriptor("seen")

BACKENDS = [
    pytest.param(HashMapStateBackend(), id="heap"),
    pytest.param(EmbeddedRocksDBStateBackend(), id="rocksdb"),
]


class SumPerWindow(KeyedProcessFunction):
    """Sums (key, amount) per key into 10 ms event-time windows, emitted by an event-time
    timer at the window's end; amounts over 100 also go to `BIG`; amount -1 asks for a
    processing-time "ping" 50 ms later (which also reports the key's list of amounts)."""

    def open(self, runtime_context):
        self.total = runtime_context.get_state(TOTAL)
        self.seen = runtime_context.get_list_state(SEEN)

    def process_element(self, value, ctx):
        _, amount = value
        timers = ctx.timer_service()
        if amount == -1:
            timers.register_processing_time_timer(timers.current_processing_time() + 50)
            return
        self.total.update((self.total.value() or 0) + amount)
        self.seen.add(amount)
        timers.register_event_time_timer(ctx.timestamp() // 10 * 10 + 9)
        if amount > 100:
            ctx.output(BIG, value)

    def on_timer(self, timestamp, ctx):
        key = ctx.get_current_key()
        if ctx.time_domain() is TimeDomain.PROCESSING_TIME:
            yield ("ping", key, timestamp, list(self.seen.get()))
            return
        yield ("sum", key, timestamp, self.total.value())
        self.total.clear()


def harness(**settings):
    return KeyedProcessFunctionHarness(SumPerWindow(), lambda r: r[0], **settings)


# (action, argument, timestamp, what the harness emits for it)
SCENARIO = [
    ("element", ("a", 1), 3, []),
    ("element", ("b", 200), 5, [("side", "big", ("b", 200), 5)]),
    ("element", ("a", 2), 8, []),
    ("watermark", 9, None, [
        ("record", ("sum", "a", 9, 3), 9),
        ("record", ("sum", "b", 9, 200), 9),
        ("watermark", 9),
    ]),
    ("element", ("a", -1), 12, []),
    ("time", 40, None, []),
    ("element", ("a", 4), 14, []),
    ("time", 50, None, [("record", ("ping", "a", 50, [1, 2, 4]), None)]),
    ("watermark", 19, None, [("record", ("sum", "a", 19, 4), 19), ("watermark", 19)]),
    ("watermark", 19, None, [("watermark", 19)]),  # nothing left to fire
]  # fmt: skip


def apply(target, action, argument, timestamp):
    if action == "element":
        target.process_element(argument, timestamp)
    elif action == "watermark":
        target.process_watermark(argument)
    else:
        target.set_processing_time(argument)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_scenario_event_by_event(backend):
    with harness(state_backend=backend) as h:
        for step, (action, argument, timestamp, expected) in enumerate(SCENARIO):
            apply(h, action, argument, timestamp)
            assert h.take_output() == expected, f"step {step}: {action} {argument}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_and_timers_of_a_key_are_visible_between_events(backend):
    with harness(state_backend=backend) as h:
        h.process_element(("a", 1), 3)
        h.process_element(("a", 2), 15)
        h.process_element(("a", -1), 16)
        assert h.get_state("a", TOTAL) == 3
        assert h.get_state("a", SEEN) == [1, 2]
        assert h.get_state("b", TOTAL) is None and h.get_state("b", SEEN) == []
        assert h.event_time_timers("a") == [9, 19]
        assert h.processing_time_timers("a") == [50]
        assert (h.num_event_time_timers(), h.num_processing_time_timers()) == (2, 1)
        assert sorted(h.keys("total")) == ["a"]
        h.process_watermark(9)
        assert h.event_time_timers("a") == [19] and h.get_state("a", TOTAL) is None
        assert h.current_watermark == 9


@pytest.mark.parametrize("at", range(1, len(SCENARIO)))
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_restore_anywhere_in_the_scenario_gives_the_same_outputs(backend, at):
    """Snapshot after step `at`, continue in a new harness (on the other backend too):
    the outputs are those of the uninterrupted run."""
    first = harness(state_backend=HashMapStateBackend())
    for action, argument, timestamp, _ in SCENARIO[:at]:
        apply(first, action, argument, timestamp)
    first.clear_output()
    snapshot = first.snapshot()
    now = first.get_processing_time()
    first.close()
    with harness(state_backend=backend, restore_from=snapshot, processing_time=now) as second:
        for step, (action, argument, timestamp, expected) in enumerate(SCENARIO[at:], at):
            apply(second, action, argument, timestamp)
            assert second.take_output() == expected, f"step {step} after a restore at {at}"


# ---- rescaling ----------------------------------------------------------------------------

KEYS = [f"k{n}" for n in range(12)]
EVENTS = (
    [("element", (key, n + 1), 2 + n % 7, None) for n, key in enumerate(KEYS)]
    + [("element", (key, -1), 9, None) for key in KEYS[::3]]
    + [("watermark", 9, None, None), ("time", 20, None, None)]
    + [("element", (key, 150), 11, None) for key in KEYS[::2]]
    + [("element", (key, 5), 13, None) for key in KEYS]
    + [("time", 60, None, None), ("watermark", 30, None, None)]
)  # fmt: skip
"""Sums, side outputs and pings of twelve keys spread over the subtasks; timers of both
time domains are pending at every cut."""


def parallel(parallelism, restore_from=None, processing_time=0):
    def make(**settings):
        return KeyedProcessFunctionHarness(SumPerWindow(), lambda r: r[0], **settings)

    return ParallelHarness(
        make, parallelism, restore_from=restore_from, processing_time=processing_time
    )


def outputs(target):
    return sorted(map(repr, target.extract_output_values())), sorted(
        map(repr, target.get_side_output(BIG))
    )


def uninterrupted():
    single = harness()
    for action, argument, timestamp, _ in EVENTS:
        apply(single, action, argument, timestamp)
    return sorted(map(repr, single.extract_output_values())), sorted(
        map(repr, single.get_side_output(BIG))
    )


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1), (1, 2)])
@pytest.mark.parametrize("at", [len(KEYS), len(KEYS) + 5, len(KEYS) + 6, len(EVENTS) - 2])
def test_a_rescaled_restore_gives_the_outputs_of_an_uninterrupted_run(before, after, at):
    old = parallel(before)
    for action, argument, timestamp, _ in EVENTS[:at]:
        apply(old, action, argument, timestamp)
    main_before, side_before = outputs(old)
    snapshot = old.snapshot()
    now = old.subtasks[0].get_processing_time()
    old.close()
    new = parallel(after, restore_from=snapshot, processing_time=now)
    for action, argument, timestamp, _ in EVENTS[at:]:
        apply(new, action, argument, timestamp)
    main_after, side_after = outputs(new)
    expected_main, expected_side = uninterrupted()
    assert sorted(main_before + main_after) == expected_main
    assert sorted(side_before + side_after) == expected_side
    assert len(expected_main) > len(KEYS) * 2  # sums and pings on both sides of the cut


def test_each_new_subtask_restores_only_its_own_keys():
    old = parallel(2)
    for key in KEYS:
        old.process_element((key, 1), 1)
    new = parallel(3, restore_from=old.snapshot())
    for index, subtask in enumerate(new.subtasks):
        owned = sorted(subtask.keys("total"))
        assert owned == sorted(k for k in KEYS if new.subtask_for(k) is subtask), index
        assert all(subtask.event_time_timers(key) == [9] for key in owned)
    assert sorted(k for s in new.subtasks for k in s.keys("total")) == sorted(KEYS)


def test_a_snapshot_of_some_subtasks_only_is_refused_where_it_misses_key_groups():
    old = parallel(2)
    part = old.subtasks[0].snapshot()
    harness(parallelism=2, subtask_index=0, restore_from=part).close()  # its own: fine
    with pytest.raises(ValueError, match=r"subtask 0 of 1 owns key groups 0-127.*combine"):
        harness(restore_from=part)
    whole = HarnessSnapshot.combine([part, old.subtasks[1].snapshot()])
    harness(restore_from=whole).close()
