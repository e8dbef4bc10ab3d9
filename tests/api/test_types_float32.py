"""`Types.FLOAT()` as PyFlink 2.3's 32-bit float, value by value (issue 24).

Each row of the tables below was observed by running PyFlink 2.3.0 here on 28 Nov 2026 (one
small job per row at parallelism 1: `from_collection(..., type_info=...).map(repr)`, and
`from_collection(...).map(lambda x: x, output_type=...)` followed by `.map(repr)`,
`.key_by(...).map(repr)`, `.rebalance().map(repr)` or nothing, each read back with
`execute_and_collect`): what a FLOAT-declared value becomes where PyFlink's records pass
through Java, and what PyFlink refuses. Rows that PyFlink could not run say so."""

from __future__ import annotations

import math

import pytest

from barrierflow import Row, StreamExecutionEnvironment, Types
from barrierflow.core.typeinfo import float32, float32_text
from barrierflow.errors import ConfigurationError

F = Types.FLOAT()
INF = math.inf
F32_MAX = 3.4028234663852886e38

# -- the rounding itself ---------------------------------------------------------------------

ROUNDED = [
    # (double, its 32-bit float as a double): Java's (float) cast, PyFlink's FloatCoder
    (110.1, 110.0999984741211),
    (30.2, 30.200000762939453),
    (1.5, 1.5),
    (-0.0, -0.0),
    (1e-46, 0.0),  # below the smallest subnormal: zero
    (3.4028235e38, F32_MAX),  # the largest float
    (3.4028236e38, INF),  # past half an ulp above it: infinity (PyFlink printed inf)
    (1e40, INF),
    (-1e40, -INF),
    (INF, INF),
]


@pytest.mark.parametrize(("double", "single"), ROUNDED)
def test_a_double_rounds_to_the_nearest_32_bit_float_and_overflows_to_infinity(double, single):
    assert float32(double) == single
    assert math.copysign(1, float32(double)) == math.copysign(1, single)


def test_nan_stays_nan():
    assert math.isnan(float32(math.nan))


def test_rounding_twice_changes_nothing():
    for double, single in ROUNDED:
        assert float32(float32(double)) == single


@pytest.mark.parametrize(
    ("double", "text"),
    [(110.1, "110.1"), (30.2, "30.2"), (1e40, "inf"), (16777217.0, "16777216.0"), (0.1, "0.1")],
)
def test_the_shortest_text_of_a_32_bit_float_is_what_java_shows(double, text):
    assert float32_text(double) == text


# -- from_collection(type_info=...): PyFlink converts on the JVM ------------------------------

ROW_F = Types.ROW([F, Types.STRING()])
COLLECTION = [
    # (type_info, element, what PyFlink's map(repr) showed for it)
    (F, 110.1, 110.0999984741211),
    (F, 1e40, INF),
    (F, -1e40, -INF),
    (F, 3.4028236e38, INF),
    (F, 1e-46, 0.0),
    (Types.DOUBLE(), 110.1, 110.1),
    (Types.TUPLE([Types.STRING(), F]), ("a", 110.1), ("a", 110.0999984741211)),
    (ROW_F, (110.1, "a"), Row(f0=110.0999984741211, f1="a")),
    (ROW_F, (None, "b"), Row(f0=None, f1="b")),  # a row field may be null
    (
        Types.TUPLE([Types.TUPLE([Types.STRING(), F]), Types.INT()]),
        (("x", 110.1), 2),
        (("x", 110.0999984741211), 2),
    ),
    (Types.BASIC_ARRAY(F), [110.1, None], [110.0999984741211, None]),
    (Types.PRIMITIVE_ARRAY(F), [110.1, 2.5], [110.0999984741211, 2.5]),
    (Types.MAP(Types.STRING(), F), {"a": 110.1}, {"a": 110.0999984741211}),
    # PyFlink 2.3 cannot build these from a collection (a ClassCastException on the JVM);
    # its coder narrows them where they cross (below), and so does barrierflow here:
    (Types.LIST(F), [110.1, 1e40], [110.0999984741211, INF]),
    (
        Types.ROW([Types.ROW([F]), Types.LIST(F)]),
        ((110.1,), [30.2, None]),
        Row(f0=Row(f0=110.0999984741211), f1=[30.200000762939453, None]),
    ),
]


@pytest.mark.parametrize(("type_info", "element", "delivered"), COLLECTION)
def test_from_collection_delivers_float_values_as_32_bit_floats(type_info, element, delivered):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([element], type_info=type_info)
    (source,) = [t.source for t in env._transformations if t.source is not None]
    assert source.values == [delivered]
    assert type(source.values[0]) is type(delivered)


REFUSED = [
    # (type_info, element): PyFlink 2.3 fails when the job is built (its converter makes
    # null of anything but a Python float, then a NullPointerException or NullFieldException)
    (F, 1),
    (F, True),
    (F, None),
    (Types.TUPLE([Types.STRING(), F]), ("a", None)),
    (Types.TUPLE([Types.STRING(), F]), ("a", 1)),
    # PyFlink turns an int in a FLOAT row field into None without a word; refused here
    (ROW_F, (1, "c")),
]


@pytest.mark.parametrize(("type_info", "element"), REFUSED)
def test_from_collection_refuses_what_pyflink_cannot_convert_when_the_job_is_built(
    type_info, element
):
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(ConfigurationError, match=r"from_collection: .* is no Float"):
        env.from_collection([element], type_info=type_info)


# -- an operator's declared output where it leaves the chain (PyFlink's FloatCoder) -----------

CROSSING = [
    # (output_type, what the function returned, what the next operator after key_by got)
    (F, 110.1, 110.0999984741211),
    (F, 1e40, INF),
    (F, -1e40, -INF),
    (F, 3.4028236e38, INF),
    (F, 1, 1.0),  # the coder takes an int or a bool as a float
    (F, True, 1.0),
    (Types.TUPLE([Types.STRING(), F]), ("a", 110.1), ("a", 110.0999984741211)),
    (ROW_F, Row(110.1, "a"), Row(f0=110.0999984741211, f1="a")),
    (ROW_F, Row(None, "a"), Row(f0=None, f1="a")),
]


@pytest.mark.parametrize(("type_info", "returned", "crossed"), CROSSING)
def test_a_float_output_is_narrowed_as_pyflink_s_coder_writes_it(type_info, returned, crossed):
    assert type_info.conform(returned) == crossed


def test_none_declared_float_fails_where_it_crosses_as_in_pyflink():
    # PyFlink: NullPointerException in the Java operator the None reaches
    with pytest.raises(TypeError, match="None is no Float"):
        F.conform(None)


def _operators(env: StreamExecutionEnvironment) -> list[str]:
    return [t.name for t in env._transformations if t.kind == "operator"]


def test_key_by_and_a_repartitioning_narrow_a_declared_float_but_a_chained_map_does_not():
    env = StreamExecutionEnvironment.get_execution_environment()
    mapped = env.from_collection([110.1]).map(lambda v: v, output_type=F)
    mapped.map(repr)  # chained: PyFlink passed 110.1 on as it was
    assert _operators(env) == ["Map", "Map"]
    mapped.key_by(lambda v: 1).map(repr)
    mapped.rebalance().map(repr)
    narrowing = [t for t in env._transformations if t.name == "Float32"]
    assert len(narrowing) == 2
    (call,) = narrowing[0].operator_args
    assert call(110.1) == 110.0999984741211


def test_no_narrowing_step_without_a_float_or_after_a_source_that_converted_already():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1.5], type_info=F).key_by(lambda v: 1).map(repr)
    env.from_collection([1.5]).map(lambda v: v, output_type=Types.DOUBLE()).rebalance()
    assert "Float32" not in _operators(env)


COLLECTED = [
    # (output_type, record, what PyFlink's execute_and_collect returned): the JVM's Float
    # comes back through py4j as its shortest text
    (F, 110.1, 110.1),
    (F, 1e40, INF),
    (F, 16777217.0, 16777216.0),
]


@pytest.mark.parametrize(("type_info", "record", "collected"), COLLECTED)
def test_execute_and_collect_returns_a_float_as_pyflink_s_bridge_does(type_info, record, collected):
    assert type_info.collected(record) == collected
