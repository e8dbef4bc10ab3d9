"""KeyedBroadcastProcessFunctionHarness and BroadcastProcessFunctionHarness, event by event:
rules on the broadcast side, keyed state and timers on the keyed side, apply_to_keyed_state,
the read-only rule, and snapshot/restore at 2 -> 3 and 3 -> 1 subtasks matching one run."""

from __future__ import annotations

import pytest

from barrierflow import OutputTag
from barrierflow.errors import UserFunctionError
from barrierflow.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from barrierflow.state import MapStateDescriptor, ValueStateDescriptor
from barrierflow.testing import (
    BroadcastProcessFunctionHarness,
    KeyedBroadcastProcessFunctionHarness,
    ParallelHarness,
)

LIMITS = MapStateDescriptor("limits")
SPENT = ValueStateDescriptor("spent")
RESETS = OutputTag("resets")


class Budget(KeyedBroadcastProcessFunction):
    """Spending (account, amount) per account against the broadcast limit of its currency
    (the account's first letter); a broadcast ("reset", currency) clears every account of it;
    at event time amount's time + 10 the account reports what it spent."""

    def open(self, runtime_context):
        self.spent = runtime_context.get_state(SPENT)

    def process_broadcast_element(self, value, ctx):
        if value[0] == "reset":

            def reset(account, state):
                if account.startswith(value[1]) and state.value() is not None:
                    ctx.output(RESETS, (account, state.value()))
                    state.clear()

            ctx.apply_to_keyed_state(SPENT, reset)
        else:
            ctx.get_broadcast_state(LIMITS).put(*value)

    def process_element(self, value, ctx):
        account, amount = value
        limit = ctx.get_broadcast_state(LIMITS).get(account[0])
        spent = (self.spent.value() or 0) + amount
        self.spent.update(spent)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        if limit is not None and spent > limit:
            yield ("over", account, spent, limit)

    def on_timer(self, timestamp, ctx):
        yield ("report", ctx.get_current_key(), timestamp, self.spent.value())


def keyed(**settings):
    return KeyedBroadcastProcessFunctionHarness(Budget(), lambda r: r[0], LIMITS, **settings)


# (action, argument, timestamp, what the harness emits for it)
SCENARIO = [
    ("element", ("e-ann", 50), 1, []),  # no limit known yet
    ("broadcast", ("e", 80), 2, []),
    ("element", ("e-ann", 40), 3, [("record", ("over", "e-ann", 90, 80), 3)]),
    ("element", ("u-bob", 500), 4, []),
    ("broadcast", ("reset", "e"), 5, [("side", "resets", ("e-ann", 90), 5)]),
    ("element", ("e-ann", 70), 6, []),
    ("watermark1", 20, None, []),  # the broadcast input holds event time back
    ("watermark2", 12, None, [("record", ("report", "e-ann", 11, 70), 11), ("watermark", 12)]),
]  # fmt: skip


def apply(target, action, argument, timestamp):
    if action == "element":
        target.process_element(argument, timestamp)
    elif action == "broadcast":
        target.process_broadcast_element(argument, timestamp)
    else:
        getattr(target, f"process_{action}")(argument)


def test_the_keyed_broadcast_scenario_event_by_event():
    with keyed() as h:
        for step, (action, argument, timestamp, expected) in enumerate(SCENARIO):
            if step == len(SCENARIO) - 1:  # before the timers fire
                assert h.get_broadcast_state(LIMITS) == {"e": 80}
                assert h.get_state("e-ann", SPENT) == 70 and h.get_state("u-bob", SPENT) == 500
                assert h.event_time_timers("e-ann") == [11, 13, 16]
            apply(h, action, argument, timestamp)
            assert h.take_output() == expected, f"step {step}: {action} {argument}"


def test_broadcast_state_is_read_only_on_the_keyed_side():
    class Writes(KeyedBroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            pass

        def process_element(self, value, ctx):
            ctx.get_broadcast_state(LIMITS).put("x", 1)

    h = KeyedBroadcastProcessFunctionHarness(Writes(), lambda r: r, LIMITS)
    with pytest.raises(UserFunctionError, match=r"Writes raised .* while handling the element"):
        h.process_element("a")


KEYS = [f"{c}-{n}" for c in "eu" for n in range(6)]
EVENTS = [
    ("broadcast", ("e", 10), 0, None),
    *[("element", (key, 4), 1, None) for key in KEYS],
    ("broadcast", ("u", 5), 2, None),
    *[("element", (key, 3), 3, None) for key in KEYS[::2]],
    ("broadcast", ("reset", "u"), 4, None),
    *[("element", (key, 5), 5, None) for key in KEYS[1::2]],
    ("watermark1", 12, None, None),
    ("watermark2", 12, None, None),
    *[("element", (key, 6), 14, None) for key in KEYS],
    ("watermark1", 30, None, None),
    ("watermark2", 30, None, None),
]  # fmt: skip


def parallel(parallelism, restore_from=None):
    return ParallelHarness(lambda **s: keyed(**s), parallelism, restore_from=restore_from)


def results(target):
    return sorted(map(repr, target.extract_output_values() + target.get_side_output(RESETS)))


@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1)])
@pytest.mark.parametrize("at", [1, 14, 21, 29, 30])
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
    for subtask in new.subtasks:  # every new subtask got a copy of the rules
        assert subtask.get_broadcast_state(LIMITS) == one.subtasks[0].get_broadcast_state(LIMITS)
    assert sorted(results(old) + results(new)) == results(one)
    assert len(results(one)) > len(KEYS)


def test_a_non_keyed_broadcast_function_sees_the_rules_of_its_subtask():
    class Label(BroadcastProcessFunction):
        def process_broadcast_element(self, value, ctx):
            ctx.get_broadcast_state(LIMITS).put_all(value)

        def process_element(self, value, ctx):
            yield (value, ctx.get_broadcast_state(LIMITS).get(value) or "?", ctx.timestamp())

    h = BroadcastProcessFunctionHarness(Label(), LIMITS)
    h.process_element("a", 1)
    h.process_broadcast_element({"a": "alpha", "b": "beta"}, 2)
    h.process_element("a", 3)
    assert h.extract_output_values() == [("a", "?", 1), ("a", "alpha", 3)]
    again = BroadcastProcessFunctionHarness(Label(), LIMITS, restore_from=h.snapshot())
    assert again.get_broadcast_state(LIMITS) == {"a": "alpha", "b": "beta"}
