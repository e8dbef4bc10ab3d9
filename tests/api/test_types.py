"""Types, TypeInformation, Row and RowKind (issue 24 items 1 and 6), through their public
paths, event by event; and what `print()` writes for a declared type, against what PyFlink
2.3 printed for the same job (recorded by running PyFlink here; see RECORDED)."""

from __future__ import annotations

import datetime
import decimal
import io
import pickle
from contextlib import redirect_stdout

import pytest

from barrierflow import Row, RowKind, StreamExecutionEnvironment, TypeInformation, Types
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.errors import ConfigurationError

# -- Types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_info", "text"),
    [
        (Types.STRING(), "String"),
        (Types.INT(), "Integer"),
        (Types.LONG(), "Long"),
        (Types.FLOAT(), "Float"),
        (Types.DOUBLE(), "Double"),
        (Types.BOOLEAN(), "Boolean"),
        (Types.BYTE(), "Byte"),
        (Types.SHORT(), "Short"),
        (Types.CHAR(), "Char"),
        (Types.BIG_INT(), "BigInteger"),
        (Types.BIG_DEC(), "BigDecimal"),
        (Types.INSTANT(), "Instant"),
        (Types.SQL_DATE(), "Date"),
        (Types.SQL_TIME(), "Time"),
        (Types.SQL_TIMESTAMP(), "Timestamp"),
        (Types.PICKLED_BYTE_ARRAY(), "PickledByteArrayTypeInfo"),
        (Types.PRIMITIVE_ARRAY(Types.INT()), "PrimitiveArrayTypeInfo<Integer>"),
        (Types.BASIC_ARRAY(Types.STRING()), "BasicArrayTypeInfo<String>"),
        (Types.OBJECT_ARRAY(Types.LONG()), "ObjectArrayTypeInfo<Long>"),
        (Types.LIST(Types.STRING()), "ListTypeInfo<String>"),
        (Types.MAP(Types.STRING(), Types.INT()), "MapTypeInfo<String, Integer>"),
        (Types.TUPLE([Types.STRING(), Types.INT()]), "TupleTypeInfo(String, Integer)"),
        (Types.ROW([Types.STRING(), Types.INT()]), "RowTypeInfo(String, Integer)"),
        (
            Types.ROW_NAMED(["w", "c"], [Types.STRING(), Types.INT()]),
            "RowTypeInfo(w: String, c: Integer)",
        ),
    ],
)
def test_every_factory_makes_a_type_information_shown_as_pyflink_shows_it(type_info, text):
    assert isinstance(type_info, TypeInformation)
    assert repr(type_info) == text


def test_types_are_equal_by_value():
    assert Types.ROW([Types.INT()]) == Types.ROW([Types.INT()])
    assert Types.INT() != Types.LONG()
    assert Types.LIST(Types.INT()) != Types.BASIC_ARRAY(Types.INT())


def test_a_row_type_names_its_fields():
    named = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])
    assert named.get_field_names() == ["word", "count"]
    assert named.get_field_index("count") == 1
    assert named.get_field_index("nope") == -1
    assert named.get_field_types() == [Types.STRING(), Types.INT()]
    assert Types.ROW([Types.STRING(), Types.INT()]).get_field_names() == ["f0", "f1"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Types.ROW_NAMED(["a"], [Types.INT(), Types.INT()]), "one name"),
        (lambda: Types.ROW_NAMED(["a", "a"], [Types.INT(), Types.INT()]), "a field name twice"),
        (lambda: Types.ROW([Types.INT]), r"call it: Types.INT\(\)"),
        (lambda: Types.ROW([int]), "must be a Types.X\\(\\) value, got <class 'int'>$"),
        (lambda: Types.LIST(int), "Types.LIST's element type must be a Types.X"),
        (lambda: Types.TUPLE(Types.INT()), "Types.TUPLE takes a list"),
    ],
)
def test_a_malformed_type_is_refused_with_one_line(make, message):
    with pytest.raises(ConfigurationError, match=message):
        make()


# -- Row -----------------------------------------------------------------------------------


def test_a_positional_row_reads_by_index_and_iterates():
    row = Row("a", 1)
    assert (row[0], row[1], row[-1], row[0:1]) == ("a", 1, 1, ["a"])
    assert list(row) == ["a", 1] and len(row) == 2
    assert "a" in row
    assert repr(row) == "<Row('a', 1)>"
    assert row.get_row_kind() is RowKind.INSERT
    with pytest.raises(AttributeError):
        _ = row.name


def test_a_named_row_reads_by_name_index_and_attribute_in_its_given_order():
    row = Row(name="Alice", age=11)
    assert (row.name, row["age"], row[0]) == ("Alice", 11, "Alice")
    assert repr(row) == "Row(name='Alice', age=11)"
    assert row.as_dict() == {"name": "Alice", "age": 11}
    assert "name" in row and "Alice" not in row
    with pytest.raises(KeyError):
        _ = row["nope"]
    with pytest.raises(AttributeError):
        _ = row.nope


def test_a_row_is_changed_by_index_or_name_never_by_attribute():
    row = Row(name="Alice", age=11)
    row["age"] = 12
    row[0] = "Bob"
    assert row.as_dict() == {"name": "Bob", "age": 12}
    with pytest.raises(AttributeError, match="set by index or name"):
        row.age = 13


def test_a_row_class_makes_named_rows():
    person = Row("name", "age")
    assert repr(person) == "<Row('name', 'age')>"
    assert person("Bob", 3) == Row(name="Bob", age=3)
    assert "name" in person
    with pytest.raises(ValueError, match="has 2 fields, got 3 values"):
        person(1, 2, 3)


def test_as_dict_recursive_and_refused_without_names():
    row = Row(key=1, value=Row(name="a", age=2), items=[Row(x=1)])
    assert row.as_dict() == {"key": 1, "value": Row(name="a", age=2), "items": [Row(x=1)]}
    assert row.as_dict(True) == {"key": 1, "value": {"name": "a", "age": 2}, "items": [{"x": 1}]}
    with pytest.raises(TypeError, match="without field names"):
        Row(1, 2).as_dict()


@pytest.mark.parametrize(
    ("left", "right", "equal"),
    [
        (Row(1, 2), Row(1, 2), True),
        (Row(1, 2), Row(2, 1), False),
        (Row(a=1, b=2), Row(b=2, a=1), True),  # named rows compare by name
        (Row(a=1, b=2), Row(1, 2), False),  # named and positional never equal
        (Row(1), Row.of_kind(RowKind.DELETE, 1), False),  # the kind counts
        (Row.of_kind(RowKind.DELETE, 1), Row.of_kind(RowKind.DELETE, 1), True),
        (Row(1, 2), (1, 2), False),
    ],
)
def test_row_equality(left, right, equal):
    assert (left == right) is equal


def test_row_kind_strings_and_a_row_survives_pickle_with_names_and_kind():
    assert [str(kind) for kind in RowKind] == ["+I", "-U", "+U", "-D"]
    row = Row.of_kind(RowKind.UPDATE_AFTER, name="a", n=1)
    copy = pickle.loads(pickle.dumps(row))
    assert copy == row and copy.get_row_kind() is RowKind.UPDATE_AFTER and copy.name == "a"
    assert hash(Row(1, 2)) == hash(Row(1, 2))


def test_mixing_positional_and_named_fields_is_refused():
    with pytest.raises(ValueError, match="positional or named fields, not both"):
        Row(1, name="a")


# -- a row type shapes records --------------------------------------------------------------

NAMED = Types.ROW_NAMED(["name", "n"], [Types.STRING(), Types.INT()])


class _Person:
    def __init__(self) -> None:
        self.n, self.name = 4, "e"


@pytest.mark.parametrize(
    ("element", "row"),
    [
        (("a", 1), Row(name="a", n=1)),
        (["b", 2], Row(name="b", n=2)),
        ({"n": 3, "name": "c"}, Row(name="c", n=3)),
        (Row(n=2, name="b"), Row(name="b", n=2)),  # by name, as PyFlink
        (Row("d", 5), Row(name="d", n=5)),  # by position
        (_Person(), Row(name="e", n=4)),
        (Row.of_kind(RowKind.DELETE, "x", 0), Row.of_kind(RowKind.DELETE, name="x", n=0)),
    ],
)
def test_a_row_type_turns_each_element_into_a_named_row(element, row):
    assert NAMED.conform(element) == row


def test_an_unnamed_row_type_names_fields_f0_f1_as_pyflink_delivers_them():
    # PyFlink 2.3: from_collection([("a", 1)], Types.ROW([STRING, INT])) -> Row(f0='a', f1=1)
    assert repr(Types.ROW([Types.STRING(), Types.INT()]).conform(("a", 1))) == ("Row(f0='a', f1=1)")


def test_an_element_of_the_wrong_arity_is_named():
    with pytest.raises(TypeError, match=r"\('a',\) has 1 fields"):
        NAMED.conform(("a",))


# -- print() follows the declared type --------------------------------------------------------

TIMESTAMP = datetime.datetime(2024, 1, 2, 3, 4, 5, 123000)
RECORDED = [
    # (declared type, element, what PyFlink 2.3 printed): pf_print.py, local mode.
    (None, ("a", 1), "('a', 1)"),
    (None, Row("a", 1), "<Row('a', 1)>"),
    (None, Row(name="a", n=1), "Row(name='a', n=1)"),
    (None, True, "True"),
    (None, {"k": 1}, "{'k': 1}"),
    (None, 1.5, "1.5"),
    (None, [1, 2], "[1, 2]"),
    (Types.STRING(), "x", "x"),
    (Types.DOUBLE(), 2.0, "2.0"),
    (Types.FLOAT(), 1.5, "1.5"),
    (Types.LONG(), 3, "3"),
    (Types.BOOLEAN(), True, "true"),
    (Types.BIG_DEC(), decimal.Decimal("1.50"), "1.50"),
    (Types.SQL_DATE(), datetime.date(2024, 1, 2), "2024-01-02"),
    (Types.SQL_TIME(), datetime.time(1, 2, 3), "01:02:03"),
    (Types.SQL_TIMESTAMP(), TIMESTAMP, "2024-01-02 03:04:05.123"),
    (Types.TUPLE([Types.STRING(), Types.INT()]), ("a", 1), "(a,1)"),
    (Types.MAP(Types.STRING(), Types.INT()), {"k": 1}, "{k=1}"),
    (Types.ROW([Types.STRING(), Types.INT()]), ("a", 1), "+I[a,1]"),
    (NAMED, ("a", 1), "+I[a,1]"),
    (Types.ROW([Types.STRING(), Types.INT()]), ("a", None), "+I[a,None]"),
    (
        Types.ROW([Types.STRING(), Types.TUPLE([Types.INT(), Types.INT()])]),
        ("a", (1, 2)),
        "+I[a,(1, 2)]",
    ),
    (
        Types.ROW([Types.STRING(), Types.ROW([Types.INT(), Types.STRING()])]),
        Row("a", Row(1, None)),
        "+I[a,Row(f0=1, f1=None)]",
    ),
    (NAMED, Row.of_kind(RowKind.DELETE, "a", 1), "-D[a,1]"),
]


@pytest.mark.parametrize(("type_info", "element", "printed"), RECORDED)
def test_print_writes_a_record_as_pyflink_prints_its_declared_type(type_info, element, printed):
    writer = PrintSink("out", type_info).create_writer(SinkContext("print", 0, 1, 0, "run-0"))
    out = io.StringIO()
    with redirect_stdout(out):
        writer.write_batch([element])
    assert out.getvalue() == f"out> {printed}\n"


def _print_sink_type(env: StreamExecutionEnvironment) -> TypeInformation | None:
    (sink,) = [t.sink for t in env._transformations if t.sink is not None]
    assert isinstance(sink, PrintSink)
    return sink.type_info


def test_the_declared_type_reaches_print_through_the_stream():
    env = StreamExecutionEnvironment.get_execution_environment()
    row = Types.ROW([Types.STRING(), Types.INT()])
    env.from_collection([("a", 1)]).map(lambda t: t, output_type=row).filter(bool).key_by(
        lambda r: r[0]
    ).reduce(lambda a, b: a).print()
    assert _print_sink_type(env) == row


def test_a_map_without_output_type_prints_python_text_again():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([("a", 1)], type_info=NAMED).map(lambda r: r).print()
    assert _print_sink_type(env) is None


@pytest.mark.parametrize("method", ["map", "flat_map", "process"])
def test_an_output_type_that_is_not_a_type_is_refused_when_the_job_is_built(method):
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_collection([1])
    with pytest.raises(ConfigurationError, match=f"{method}'s declared type must be a Types.X"):
        getattr(stream, method)(lambda v: v, output_type=Types.INT)


def test_from_collection_with_a_row_type_yields_named_rows_and_prints_them_as_rows():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([("a", 1), {"name": "b", "n": 2}], type_info=NAMED).print()
    (source,) = [t.source for t in env._transformations if t.source is not None]
    assert source.values == [Row(name="a", n=1), Row(name="b", n=2)]
    assert _print_sink_type(env) == NAMED


def test_from_collection_refuses_a_type_info_that_is_not_a_type():
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ConfigurationError, match="from_collection's type_info must be"):
        env.from_collection([1], type_info="int")


def test_from_collection_refuses_an_element_its_row_type_cannot_hold():
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ConfigurationError, match=r"from_collection: \('a',\) has 1 fields"):
        env.from_collection([("a", 1), ("a",)], type_info=NAMED)
    with pytest.raises(ConfigurationError, match="from_collection: 5 is not a row of"):
        env.from_collection([5], type_info=NAMED)
