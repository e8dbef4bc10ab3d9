"""Dead letters of user functions (issue 21, item 7): with `dead_letters`, a record the
function raises on leaves on the DEAD_LETTERS side output as a DeadLetter naming the
operator, the record and the error, after the batch's other outputs, and the rest of the
batch goes on; each record is processed once. Without it the error fails the task as before.
Operators driven batch by batch with a collecting output (no Spark)."""

from __future__ import annotations

import threading

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import OutputTag
from barrierflow.connectors.base import DEAD_LETTERS, DeadLetter
from barrierflow.functions import KeyedProcessFunction, ProcessFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.keyed import KeyedProcessOperator, KeyedReduceOperator
from barrierflow.runtime.operators.process import ProcessOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator
from barrierflow.state import ValueStateDescriptor

TAG = DEAD_LETTERS.tag_id


def letter(operator: str, function: str, record, error: str) -> DeadLetter:
    return DeadLetter(operator, None, None, None, error, record, function)


class Counting:
    """`function` that counts its calls per record (each record must be processed once)."""

    def __init__(self, function) -> None:
        self.function = function
        self.calls: list = []

    def __call__(self, value):
        self.calls.append(value)
        return self.function(value)


def test_a_map_sends_the_records_it_raises_on_to_dead_letters_and_goes_on():
    parse = Counting(int)
    operator, out = started(MapOperator("m", "Parse", parse, dead_letters=True), ManualClock())
    operator.process_batch(RecordBatch(["1", "x", "3", "y", "5"], [10, 20, 30, 40, 50]))
    assert out.take() == [
        ("record", 1, 10),
        ("record", 3, 30),
        ("record", 5, 50),
        (
            "side",
            TAG,
            letter("Parse", "map", "x", "ValueError: invalid literal for int() with base 10: 'x'"),
            20,
        ),
        (
            "side",
            TAG,
            letter("Parse", "map", "y", "ValueError: invalid literal for int() with base 10: 'y'"),
            40,
        ),
    ]
    assert parse.calls == ["1", "x", "3", "y", "5"]  # once each, the bad ones too


def test_a_map_without_dead_letters_fails_on_the_record():
    operator, out = started(MapOperator("m", "Parse", int), ManualClock())
    with pytest.raises(ValueError, match="'x'"):
        operator.process_batch(RecordBatch(["1", "x"]))
    assert out.take() == []


def test_a_batch_without_bad_records_is_emitted_as_without_dead_letters():
    operator, out = started(MapOperator("m", "Parse", int, dead_letters=True), ManualClock())
    operator.process_batch(RecordBatch(["1", "2"]))
    assert out.take() == [("record", 1, None), ("record", 2, None)]


def test_the_first_and_the_last_record_and_a_whole_batch_can_be_dead_letters():
    operator, out = started(MapOperator("m", "Parse", int, dead_letters=True), ManualClock())
    operator.process_batch(RecordBatch(["a", "2", "b"]))
    assert [event[2].record if event[0] == "side" else event[1] for event in out.take()] == [
        2, "a", "b",
    ]  # fmt: skip
    operator.process_batch(RecordBatch(["c", "d"]))
    assert [(event[0], event[2].record) for event in out.take()] == [
        ("side", "c"),
        ("side", "d"),
    ]


def test_a_filter_keeps_the_good_records_with_their_timestamps():
    keep_even = Counting(lambda value: int(value) % 2 == 0)
    operator, out = started(
        FilterOperator("f", "Even", keep_even, dead_letters=True), ManualClock()
    )
    operator.process_batch(RecordBatch(["2", "x", "3", "4"], [1, 2, 3, 4]))
    events = out.take()
    assert events[:2] == [("record", "2", 1), ("record", "4", 4)]
    assert events[2][:2] == ("side", TAG) and events[2][2].record == "x" and events[2][3] == 2
    assert len(events) == 3
    assert keep_even.calls == ["2", "x", "3", "4"]


def test_a_flat_map_drops_what_a_failing_generator_yielded_before_it_raised():
    def split(line):
        for word in line.split():
            if word == "!":
                raise ValueError(f"bad line {line!r}")
            yield word

    operator, out = started(FlatMapOperator("f", "Words", split, dead_letters=True), ManualClock())
    operator.process_batch(RecordBatch(["a b", "c ! d", "e"], [1, 2, 3]))
    assert out.take() == [
        ("record", "a", 1),
        ("record", "b", 1),
        ("record", "e", 3),
        ("side", TAG, letter("Words", "flat_map", "c ! d", "ValueError: bad line 'c ! d'"), 2),
    ]


class Halve(ProcessFunction):
    """Emits half of each even number and a side output of it; raises on odd numbers, after
    it emitted to both outputs already."""

    LOG = OutputTag("log")

    def process_element(self, value, ctx):
        ctx.output(self.LOG, f"saw {value}")
        yield value
        if value % 2:
            raise ValueError(f"odd {value}")
        yield value // 2


def test_a_process_function_drops_every_output_of_the_record_it_raised_on():
    operator, out = started(
        ProcessOperator("p", "Halve", Halve(), dead_letters=True), ManualClock()
    )
    operator.process_batch(RecordBatch([4, 3, 6], [1, 2, 3]))
    assert out.take() == [
        ("record", 4, 1),
        ("record", 2, 1),
        ("record", 6, 3),
        ("record", 3, 3),
        ("side", "log", "saw 4", 1),
        ("side", "log", "saw 6", 3),
        ("side", TAG, letter("Halve", "process_element", 3, "ValueError: odd 3"), 2),
    ]


class Total(KeyedProcessFunction):
    """A running total per key; raises on a negative amount."""

    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element(self, value, ctx):
        key, amount = value
        if amount < 0:
            raise ValueError(f"negative amount {amount}")
        self.total.update((self.total.value() or 0) + amount)
        yield key, self.total.value()


def test_a_keyed_process_function_goes_on_with_its_state_after_a_dead_letter():
    operator = KeyedProcessOperator("k", "Total", lambda v: v[0], Total(), dead_letters=True)
    operator, out = started(operator, ManualClock())
    operator.process_batch(RecordBatch([("a", 1), ("a", -5), ("b", 2), ("a", 3)]))
    assert out.take() == [
        ("record", ("a", 1), None),
        ("record", ("b", 2), None),
        ("record", ("a", 4), None),
        (
            "side",
            TAG,
            letter("Total", "process_element", ("a", -5), "ValueError: negative amount -5"),
            None,
        ),
    ]


def test_a_reduce_keeps_the_key_s_reduction_when_it_raises():
    def add(a, b):
        if b[1] < 0:
            raise ValueError("negative")
        return a[0], a[1] + b[1]

    operator = KeyedReduceOperator("r", "Sum", lambda v: v[0], add, dead_letters=True)
    operator, out = started(operator, ManualClock())
    operator.process_batch(RecordBatch([("a", 1), ("a", -1), ("a", 2)], [5, 6, 7]))
    assert out.take() == [
        ("record", ("a", 1), 5),
        ("record", ("a", 3), 7),
        ("side", TAG, letter("Sum", "reduce", ("a", -1), "ValueError: negative"), 6),
    ]


def test_a_record_that_cannot_be_pickled_is_kept_as_its_repr():
    lock = threading.Lock()

    def fail(value):
        raise RuntimeError("no")

    operator, out = started(MapOperator("m", "M", fail, dead_letters=True), ManualClock())
    operator.process_batch(RecordBatch([lock]))
    (event,) = out.take()
    assert event[2] == letter("M", "map", repr(lock), "RuntimeError: no")
    assert event[2].as_dict() == {
        "source": "M",
        "function": "map",
        "record": repr(lock),
        "error": "RuntimeError: no",
    }
