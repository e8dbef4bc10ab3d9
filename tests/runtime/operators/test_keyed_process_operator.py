"""A KeyedProcessOperator driven directly: timers in both time domains, side outputs,
timestamps, and timers surviving snapshot and restore (no Spark). The operator is set up,
snapshotted and restored by the public harness (`barrierflow.testing`); the tests hand it
whole batches."""

from __future__ import annotations

from support.clocks import ManualClock
from support.operator_harness import fire_due

from barrierflow import OutputTag
from barrierflow.functions import KeyedProcessFunction, TimeDomain
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.key_groups import assign_to_key_group
from barrierflow.testing import KeyedProcessFunctionHarness

BIG = OutputTag("big")


class SumUntilTimer(KeyedProcessFunction):
    """Sums values per key; an event-time timer at the end of each 10 ms window emits it.

    Records (key, value); values over 100 also go to the side output `BIG`, and a
    record with value -1 registers a processing-time timer 50 ms from now.
    """

    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element(self, value, ctx):
        key, amount = value
        assert ctx.get_current_key() == key
        if amount == -1:
            ctx.timer_service().register_processing_time_timer(
                ctx.timer_service().current_processing_time() + 50
            )
            return
        self.total.update((self.total.value() or 0) + amount)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() // 10 * 10 + 9)
        if amount > 100:
            ctx.output(BIG, value)
        yield ("seen", key, ctx.timestamp(), ctx.timer_service().current_watermark())

    def on_timer(self, timestamp, ctx):
        if ctx.time_domain() is TimeDomain.PROCESSING_TIME:
            yield ("ping", ctx.get_current_key(), timestamp)
            yield BIG, ("ping", ctx.get_current_key())  # PyFlink's way to a side output
            return
        yield ("sum", ctx.get_current_key(), timestamp, self.total.value())
        self.total.clear()


def harness_with(function=None, clock=None, **settings):
    clock = clock or ManualClock()
    function = function or SumUntilTimer()
    return KeyedProcessFunctionHarness(function, lambda r: r[0], clock=clock, **settings)


def operator_with(function=None, clock=None, **settings):
    harness = harness_with(function, clock, **settings)
    return harness.operator, harness.output, harness.clock


def records(*pairs_with_time):
    return RecordBatch([(k, v) for k, v, _ in pairs_with_time], [t for _, _, t in pairs_with_time])


MIN = NO_TIMESTAMP


def test_outputs_of_process_element_carry_the_records_timestamp():
    operator, out, _ = operator_with()
    operator.process_batch(records(("a", 1, 3), ("b", 2, 5)))
    assert out.take() == [
        ("record", ("seen", "a", 3, MIN), 3),
        ("record", ("seen", "b", 5, MIN), 5),
    ]


def test_a_watermark_fires_due_event_time_timers_before_it_is_passed_on():
    operator, out, _ = operator_with()
    operator.process_batch(records(("b", 2, 5), ("a", 1, 3)))
    out.take()
    operator.process_watermark(Watermark(9))
    assert out.take() == [
        ("record", ("sum", "a", 9, 1), 9),  # equal timestamps fire in key order
        ("record", ("sum", "b", 9, 2), 9),
        ("watermark", 9),
    ]
    operator.process_batch(records(("a", 4, 12)))
    out.take()
    operator.process_watermark(Watermark(15))
    assert out.take() == [("watermark", 15)]
    operator.process_watermark(Watermark(19))
    assert out.take() == [("record", ("sum", "a", 19, 4), 19), ("watermark", 19)]


def test_the_context_sees_the_current_watermark():
    operator, out, _ = operator_with()
    operator.process_watermark(Watermark(100))
    operator.process_batch(records(("a", 1, 150)))
    assert out.take() == [("watermark", 100), ("record", ("seen", "a", 150, 100), 150)]


def test_a_processing_time_timer_fires_when_the_clock_reaches_it_and_erases_the_timestamp():
    operator, out, clock = operator_with(clock=ManualClock(1_000))
    operator.process_batch(records(("a", -1, 7)))
    assert operator.next_wakeup() == 1_050
    clock.advance(49)
    fire_due(operator, clock)
    assert out.take() == []
    clock.advance(1)
    fire_due(operator, clock)
    assert out.take() == [
        ("record", ("ping", "a", 1_050), None),
        ("side", "big", ("ping", "a"), None),
    ]
    assert operator.next_wakeup() is None


def test_side_outputs_go_to_their_tag_with_the_records_timestamp():
    operator, out, _ = operator_with()
    operator.process_batch(records(("a", 500, 4)))
    assert out.take() == [
        ("record", ("seen", "a", 4, MIN), 4),
        ("side", "big", ("a", 500), 4),
    ]


class Deleting(KeyedProcessFunction):
    def process_element(self, value, ctx):
        timers = ctx.timer_service()
        timers.register_event_time_timer(10)
        timers.register_event_time_timer(20)
        timers.delete_event_time_timer(10)
        timers.register_processing_time_timer(5)
        timers.delete_processing_time_timer(5)

    def on_timer(self, timestamp, ctx):
        yield timestamp


def test_deleted_timers_do_not_fire():
    operator, out, _clock = operator_with(Deleting())
    operator.process_batch(RecordBatch([("a", 0)]))
    assert operator.next_wakeup() is None
    operator.process_watermark(Watermark(30))
    assert out.take() == [("record", 20, 20), ("watermark", 30)]


def test_records_without_timestamps_give_outputs_without_timestamps():
    class Echo(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield (value, ctx.timestamp())

    operator, out, _ = operator_with(Echo())
    operator.process_batch(RecordBatch([("a", 1)]))
    assert out.take() == [("record", (("a", 1), None), None)]


def test_timers_and_state_survive_a_snapshot_and_restore():
    harness = harness_with(clock=ManualClock(1_000))
    harness.operator.process_batch(records(("a", 1, 3), ("b", 2, 15), ("c", -1, 0)))
    snapshot = harness.snapshot()
    assert snapshot.subtasks[0].timers is not None

    again, out2, clock2 = operator_with(clock=ManualClock(2_000), restore_from=snapshot)
    assert again.next_wakeup() == 1_050  # already due: fires at the next wake-up
    fire_due(again, clock2)
    again.process_watermark(Watermark(20))
    assert out2.take() == [
        ("record", ("ping", "c", 1_050), None),
        ("side", "big", ("ping", "c"), None),
        ("record", ("sum", "a", 9, 1), 9),
        ("record", ("sum", "b", 19, 2), 19),
        ("watermark", 20),
    ]


def test_a_restore_at_another_parallelism_takes_only_its_own_keys_timers():
    harness = harness_with()
    keys = [f"k{i}" for i in range(20)]
    harness.operator.process_batch(records(*((k, 1, 5) for k in keys)))
    snapshot = harness.snapshot()

    half, out, _ = operator_with(restore_from=snapshot, parallelism=2, subtask_index=0)
    assert half.context.key_group_range.end == 63
    half.process_watermark(Watermark(9))
    fired = sorted(event[1][1] for event in out.take() if event[0] == "record")
    assert fired == sorted(k for k in keys if assign_to_key_group(k, 128) <= 63)
    assert 0 < len(fired) < len(keys)


def test_an_operator_without_timers_snapshots_no_timer_section():
    class Stateless(KeyedProcessFunction):
        def process_element(self, value, ctx):
            return None

    operator, _, _ = operator_with(Stateless())
    operator.process_batch(RecordBatch([("a", 1)]))
    snapshot = operator.snapshot_state(1)
    assert snapshot is not None and snapshot.timers is None
