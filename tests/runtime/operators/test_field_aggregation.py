"""KeyedStream.sum/min/max/min_by/max_by (issue 24 item 10), with PyFlink's semantics: the
keyed reduce emits each key's running aggregate after every record; sum/min/max fold one
field and keep the key's first record's other fields, min_by/max_by keep the whole record
(the earliest on a tie). Driven event by event through the keyed reduce operator."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import Row, StreamExecutionEnvironment
from barrierflow.errors import JobDefinitionError
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operators.field_aggregation import FieldAggregation
from barrierflow.runtime.operators.keyed import KeyedReduceOperator

Point = namedtuple("Point", "key x y")


@dataclass
class Reading:
    key: str
    value: int
    note: str


def run(kind, position, records, key=lambda r: r[0]):
    operator = KeyedReduceOperator("r", kind, key, FieldAggregation(kind, position))
    operator, out = started(operator, ManualClock())
    operator.process_batch(RecordBatch(list(records)))
    return [value for _, value, _ in out.take()]


TUPLES = [("a", 3, "x"), ("b", 9, "p"), ("a", 1, "y"), ("a", 5, "z"), ("a", 1, "w")]


@pytest.mark.parametrize(
    ("kind", "emitted"),
    [
        ("sum", [("a", 3, "x"), ("b", 9, "p"), ("a", 4, "x"), ("a", 9, "x"), ("a", 10, "x")]),
        ("min", [("a", 3, "x"), ("b", 9, "p"), ("a", 1, "x"), ("a", 1, "x"), ("a", 1, "x")]),
        ("max", [("a", 3, "x"), ("b", 9, "p"), ("a", 3, "x"), ("a", 5, "x"), ("a", 5, "x")]),
        # min_by/max_by keep whole records; on a tie (the last ("a", 1, "w")) the earliest
        ("min_by", [("a", 3, "x"), ("b", 9, "p"), ("a", 1, "y"), ("a", 1, "y"), ("a", 1, "y")]),
        ("max_by", [("a", 3, "x"), ("b", 9, "p"), ("a", 3, "x"), ("a", 5, "z"), ("a", 5, "z")]),
    ],
)
def test_each_aggregation_of_a_tuple_field_record_by_record(kind, emitted):
    assert run(kind, 1, TUPLES) == emitted


@pytest.mark.parametrize(
    ("kind", "position", "records", "key", "emitted"),
    [
        # lists
        ("sum", 1, [["a", 1], ["a", 2]], lambda r: r[0], [["a", 1], ["a", 3]]),
        # dicts, by name
        (
            "max",
            "n",
            [{"k": "a", "n": 2, "t": 1}, {"k": "a", "n": 7, "t": 2}],
            lambda r: r["k"],
            [{"k": "a", "n": 2, "t": 1}, {"k": "a", "n": 7, "t": 1}],
        ),
        # named tuples, by name and by position
        ("sum", "y", [Point("a", 1, 10), Point("a", 2, 5)], lambda r: r.key,
         [Point("a", 1, 10), Point("a", 1, 15)]),
        ("min_by", 1, [Point("a", 4, 0), Point("a", 2, 9)], lambda r: r.key,
         [Point("a", 4, 0), Point("a", 2, 9)]),
        # objects, by attribute
        (
            "sum",
            "value",
            [Reading("a", 1, "first"), Reading("a", 4, "second")],
            lambda r: r.key,
            [Reading("a", 1, "first"), Reading("a", 5, "first")],
        ),
        # Rows, by name and by position (a changed field makes a new Row)
        ("sum", "n", [Row(k="a", n=1), Row(k="a", n=5)], lambda r: r.k,
         [Row(k="a", n=1), Row(k="a", n=6)]),
        ("max", 1, [Row("a", 3), Row("a", 1), Row("a", 8)], lambda r: r[0],
         [Row("a", 3), Row("a", 3), Row("a", 8)]),
        ("min_by", "n", [Row(k="a", n=4), Row(k="a", n=2)], lambda r: r.k,
         [Row(k="a", n=4), Row(k="a", n=2)]),
        # basic types: the record is its own field 0
        ("sum", 0, [2, 3, 4], lambda r: r % 2, [2, 3, 6]),
        ("max_by", 0, ["b", "a", "c"], lambda r: 0, ["b", "b", "c"]),
    ],
)  # fmt: skip
def test_fields_by_position_or_name_across_record_shapes(kind, position, records, key, emitted):
    assert run(kind, position, records, key) == emitted


def test_the_accumulator_in_state_is_never_changed_in_place():
    first, second = ["a", 1], ["a", 2]
    assert run("sum", 1, [first, second]) == [["a", 1], ["a", 3]]
    assert first == ["a", 1]  # a snapshot sharing the stored list would see a change
    row = Row(k="a", n=1)
    assert run("sum", "n", [row, Row(k="a", n=2)], lambda r: r.k)[-1] == Row(k="a", n=3)
    assert row == Row(k="a", n=1)


def test_a_basic_record_has_only_field_zero():
    with pytest.raises(TypeError, match=r"sum\(1\) on a int record: .* only field 0"):
        FieldAggregation("sum", 1)(1, 2)


def test_a_missing_field_is_named():
    with pytest.raises(KeyError, match="has no field 'n'"):
        FieldAggregation("sum", "n")({"m": 1}, {"m": 2})


def test_the_api_names_each_step_and_refuses_a_field_that_is_no_position_or_name():
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    keyed = env.from_collection([("a", 1)]).key_by(lambda r: r[0])
    for method in ("sum", "min", "max", "min_by", "max_by"):
        getattr(keyed, method)(1).print()
    names = [op.name for v in env.get_job_graph().vertices for op in v.operators]
    assert names[1:] == ["Sum", "Print", "Min", "Print", "Max", "Print", "MinBy", "Print",
                         "MaxBy", "Print"]  # fmt: skip
    with pytest.raises(JobDefinitionError, match=r"sum needs a field position \(int\) or name"):
        keyed.sum(1.5)


def test_an_aggregation_keeps_the_declared_type_of_its_records():
    from barrierflow import Types

    row_type = Types.ROW_NAMED(["k", "n"], [Types.STRING(), Types.INT()])
    env = StreamExecutionEnvironment.get_execution_environment()
    rows = env.from_collection([Row(k="a", n=1)], type_info=row_type)
    assert rows.key_by(lambda r: r.k).sum("n")._declared_type == row_type
