"""KeyedCoProcessFunctionHarness and CoProcessFunctionHarness, event by event: each input's
elements and watermarks, shared keyed state and timers, snapshot/restore at 2 -> 3 and
3 -> 1 subtasks matching an uninterrupted run; ProcessFunction, map and flat_map harnesses
with operator list state (CheckpointedFunction) restored."""

from __future__ import annotations

import pytest

from barrierflow import OutputTag
from barrierflow.functions import (
    CheckpointedFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
    MapFunction,
)
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor
from barrierflow.testing import (
    CoProcessFunctionHarness,
    HarnessSnapshot,
    KeyedCoProcessFunctionHarness,
    MapFunctionHarness,
    ParallelHarness,
)

UNMATCHED = OutputTag("unmatched")


class MatchPayments(KeyedCoProcessFunction):
    """Orders (id, amount) on input 1, payments (id, paid) on input 2: a payment matching a
    stored order emits it; an order still unpaid when event time passes its time + 10 goes
    to `UNMATCHED`."""

    def open(self, runtime_context):
        self.order = runtime_context.get_state(ValueStateDescriptor("order"))

    def process_element1(self, value, ctx):
        self.order.update(value)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)

    def process_element2(self, value, ctx):
        order = self.order.value()
        if order is not None:
            self.order.clear()
            yield ("paid", order, value[1])

    def on_timer(self, timestamp, ctx):
        if self.order.value() is not None:
            yield UNMATCHED, self.order.value()
            self.order.clear()


def keyed(**settings):
    return KeyedCoProcessFunctionHarness(
        MatchPayments(), lambda o: o[0], lambda p: p[0], **settings
    )


# (action, argument, timestamp, what the harness emits for it)
SCENARIO = [
    ("element1", ("o1", 30), 1, []),
    ("element1", ("o2", 50), 2, []),
    ("element2", ("o1", "card"), 4, [("record", ("paid", ("o1", 30), "card"), 4)]),
    ("element2", ("o9", "cash"), 5, []),
    ("watermark1", 20, None, []),  # input 2 holds event time back
    ("watermark2", 11, None, [("watermark", 11)]),
    ("watermark2", 12, None, [("side", "unmatched", ("o2", 50), 12), ("watermark", 12)]),
    ("watermark", 30, None, [("watermark", 30)]),
]  # fmt: skip


def apply(target, action, argument, timestamp):
    if action.startswith("element"):
        getattr(target, f"process_{action}")(argument, timestamp)
    else:
        getattr(target, f"process_{action}")(argument)


def test_the_keyed_two_input_scenario_event_by_event():
    with keyed() as h:
        for step, (action, argument, timestamp, expected) in enumerate(SCENARIO):
            apply(h, action, argument, timestamp)
            assert h.take_output() == expected, f"step {step}: {action} {argument}"
            if step == 1:
                assert h.get_state("o2", ValueStateDescriptor("order")) == ("o2", 50)
                assert h.event_time_timers("o2") == [12]


KEYS = [f"o{n}" for n in range(10)]
EVENTS = [
    *[("element1", (key, n), n, None) for n, key in enumerate(KEYS)],
    *[("element2", (key, "card"), 12, None) for key in KEYS[::2]],
    ("watermark1", 14, None, None),
    ("watermark2", 14, None, None),
    *[("element1", (key, 100 + n), 20, None) for n, key in enumerate(KEYS[:5])],
    *[("element2", (key, "cash"), 22, None) for key in KEYS[1:3]],
    ("watermark", 40, None, None),
]  # fmt: skip


def parallel(parallelism, restore_from=None):
    return ParallelHarness(lambda **s: keyed(**s), parallelism, restore_from=restore_from)


def results(target):
    return sorted(map(repr, target.extract_output_values() + target.get_side_output(UNMATCHED)))


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1)])
@pytest.mark.parametrize("at", [5, 10, 16, 22])
def test_a_rescaled_restore_gives_the_outputs_of_an_uninterrupted_run(before, after, at):
    one = parallel(1)
    for event in EVENTS:
        apply(one, *event[:3])
    old = parallel(before)
    for event in EVENTS[:at]:
        apply(old, *event[:3])
    new = parallel(after, restore_from=old.snapshot())
    for action, argument, _, _ in EVENTS[:at]:  # a restored operator's event time starts
        if action.startswith("watermark"):  # over: upstream sends each input's again
            apply(new, action, argument, None)
    for event in EVENTS[at:]:
        apply(new, *event[:3])
    assert sorted(results(old) + results(new)) == results(one)
    assert len(results(one)) > 10


class Pairs(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield ("left", value, ctx.timestamp(), ctx.timer_service().current_watermark())

    def process_element2(self, value, ctx):
        yield UNMATCHED, ("right", value)


def test_the_non_keyed_two_input_harness_combines_the_watermarks():
    h = CoProcessFunctionHarness(Pairs())
    h.process_watermark2(7)
    h.process_element1("x", 3)
    h.process_element2("y", 4)
    h.process_watermark1(5)
    h.process_element1("z", 6)
    assert h.take_output() == [
        ("record", ("left", "x", 3, -(2**63)), 3),
        ("side", "unmatched", ("right", "y"), 4),
        ("watermark", 5),
        ("record", ("left", "z", 6, 5), 6),
    ]


class CountingMap(MapFunction, CheckpointedFunction):
    """Numbers its records; the count is operator list state, split across subtasks."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("count"))
        self.count = sum(self.state.get() or [])

    def snapshot_state(self, context):
        self.state.update([self.count])

    def map(self, value):
        self.count += 1
        return (value, self.count)


def test_operator_list_state_of_every_old_subtask_is_redistributed():
    olds = [MapFunctionHarness(CountingMap(), parallelism=2, subtask_index=i) for i in range(2)]
    for n in range(3):
        olds[0].process_element(n)
    olds[1].process_element("x")
    whole = HarnessSnapshot.combine(h.snapshot() for h in olds)
    news = [MapFunctionHarness(CountingMap(), restore_from=whole)]
    news[0].process_element("y")
    assert news[0].extract_output_values() == [("y", 5)]  # 3 + 1 restored, then one more
