"""Co-process operators driven directly: two inputs, the minimum watermark, shared keyed state
and timers of a KeyedCoProcessFunction, and their snapshot and restore (no Spark)."""

from __future__ import annotations

from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import OutputTag
from barrierflow.core.co_functions import _CoMapAsProcess
from barrierflow.functions import CoMapFunction, CoProcessFunction, KeyedCoProcessFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import StreamStatus, Watermark
from barrierflow.runtime.operators.co_process import CoProcessOperator
from barrierflow.state import ValueStateDescriptor
from barrierflow.testing import KeyedCoProcessFunctionHarness

UNMATCHED = OutputTag("unmatched")


class MatchOrdersAndPayments(KeyedCoProcessFunction):
    """Orders (id, amount) on input 1, payments (id, paid) on input 2; emits (id, amount,
    paid) once both are there; an order unpaid at its timestamp + 10 goes to UNMATCHED."""

    def open(self, runtime_context):
        self.order = runtime_context.get_state(ValueStateDescriptor("order"))
        self.payment = runtime_context.get_state(ValueStateDescriptor("payment"))

    def process_element1(self, value, ctx):
        if self.payment.value() is not None:
            yield (value[0], value[1], self.payment.value())
            self.payment.clear()
        else:
            self.order.update(value[1])
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)

    def process_element2(self, value, ctx):
        if self.order.value() is not None:
            yield (value[0], self.order.value(), value[1])
            self.order.clear()
        else:
            self.payment.update(value[1])

    def on_timer(self, timestamp, ctx):
        if self.order.value() is not None:
            ctx.output(UNMATCHED, (ctx.get_current_key(), self.order.value()))
            self.order.clear()


def keyed_harness(**settings):
    function = MatchOrdersAndPayments()
    return KeyedCoProcessFunctionHarness(function, lambda o: o[0], lambda p: p[0], **settings)


def keyed_operator(**settings):
    harness = keyed_harness(**settings)
    return harness.operator, harness.output


def test_records_of_both_inputs_with_one_key_share_its_state():
    operator, out = keyed_operator()
    operator.process_batch1(RecordBatch([("o1", 5), ("o2", 7)], [1, 2]))
    operator.process_batch2(RecordBatch([("o2", True)], [3]))
    operator.process_batch2(RecordBatch([("o3", True)], [4]))
    operator.process_batch1(RecordBatch([("o3", 9)], [5]))
    assert out.take() == [("record", ("o2", 7, True), 3), ("record", ("o3", 9, True), 5)]


def test_timers_fire_only_when_the_minimum_of_both_inputs_watermarks_passes_them():
    operator, out = keyed_operator()
    operator.process_batch1(RecordBatch([("o1", 5)], [1]))
    operator.process_watermark1(Watermark(20))
    assert out.take() == []
    operator.process_watermark2(Watermark(10))
    assert out.take() == [("watermark", 10)]
    operator.process_watermark2(Watermark(11))
    assert out.take() == [("side", "unmatched", ("o1", 5), 11), ("watermark", 11)]


def test_an_idle_input_does_not_hold_back_the_other():
    operator, out = keyed_operator()
    operator.process_batch1(RecordBatch([("o1", 5)], [1]))
    operator.process_stream_status2(StreamStatus.IDLE)
    operator.process_watermark1(Watermark(30))
    assert out.take() == [("side", "unmatched", ("o1", 5), 11), ("watermark", 30)]


def test_state_and_timers_survive_a_snapshot_and_restore():
    harness = keyed_harness()
    harness.operator.process_batch1(RecordBatch([("o1", 5)], [1]))
    harness.operator.process_batch2(RecordBatch([("o2", False)], [2]))
    snapshot = harness.snapshot()

    again, out = keyed_operator(restore_from=snapshot)
    again.process_batch1(RecordBatch([("o2", 8)], [3]))
    again.process_watermark1(Watermark(50))
    again.process_watermark2(Watermark(50))
    assert out.take() == [
        ("record", ("o2", 8, False), 3),
        ("side", "unmatched", ("o1", 5), 11),
        ("watermark", 50),
    ]


class Tagging(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield ("first", value, ctx.timer_service().current_watermark())

    def process_element2(self, value, ctx):
        ctx.output(UNMATCHED, value)


def test_a_co_process_function_sees_each_input_and_the_combined_watermark():
    operator = CoProcessOperator("c", "c", Tagging())
    _, out = started(operator, ManualClock())
    operator.process_watermark1(Watermark(4))
    operator.process_watermark2(Watermark(6))
    operator.process_batch1(RecordBatch(["a"], [7]))
    operator.process_batch2(RecordBatch(["b"]))
    assert out.take() == [
        ("watermark", 4),
        ("record", ("first", "a", 4), 7),
        ("side", "unmatched", "b", None),
    ]


class Lengths(CoMapFunction):
    def map1(self, value):
        return len(value)

    def map2(self, value):
        return -value


def test_a_co_map_function_maps_each_input_with_its_own_method():
    operator = CoProcessOperator("m", "m", _CoMapAsProcess(Lengths()))
    _, out = started(operator, ManualClock())
    operator.process_batch1(RecordBatch(["abc"]))
    operator.process_batch2(RecordBatch([5]))
    assert out.take() == [("record", 3, None), ("record", -5, None)]
