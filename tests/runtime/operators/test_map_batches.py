"""map_batches on Arrow and on Python-row batches, with and without event time, event by event."""

from __future__ import annotations

from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow.core.functions import Function
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.map_batches import MapBatchesOperator


class Bid(NamedTuple):
    auction: int
    price: int


ROWS = [{"auction": 1, "price": 10}, {"auction": 246, "price": 20}, {"auction": 3, "price": 30}]
STAMPS = [100, 200, 300]


def inputs(timestamped: bool) -> list[Any]:
    """The same three bids as Arrow, as dicts and as NamedTuples."""
    stamps = STAMPS if timestamped else None
    return [
        ColumnarBatch(pa.RecordBatch.from_pylist(ROWS), stamps),
        RecordBatch(list(ROWS), None if stamps is None else list(stamps)),
        RecordBatch([Bid(**row) for row in ROWS], None if stamps is None else list(stamps)),
    ]


def run(function: Any, batch: Any) -> list[tuple[Any, ...]]:
    operator, out = started(MapBatchesOperator("mb", "MapBatches", function), ManualClock())
    operator.process_batch(batch)
    operator.process_watermark(Watermark(250))
    return out.take()


def q1(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Nexmark q1's shape: replace a column, keep the others (and _timestamp, if any)."""
    dollars = pc.multiply(batch["price"], 0.908)
    return batch.set_column(batch.schema.get_field_index("price"), "price", dollars)


def q2(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.filter(pc.equal(pc.remainder(batch["auction"], 123), 0))


@pytest.mark.parametrize("batch", inputs(timestamped=True), ids=["arrow", "dicts", "tuples"])
def test_with_event_time_rows_keep_their_timestamps(batch: Any) -> None:
    assert run(q1, batch) == [
        ("record", {"auction": 1, "price": pytest.approx(9.08)}, 100),
        ("record", {"auction": 246, "price": pytest.approx(18.16)}, 200),
        ("record", {"auction": 3, "price": pytest.approx(27.24)}, 300),
        ("watermark", 250),
    ]
    assert run(q2, batch) == [("record", {"auction": 246, "price": 20}, 200), ("watermark", 250)]
    # A projection drops _timestamp but keeps the row count: timestamps by position.
    assert run(lambda b: b.select(["auction"]), batch) == [
        ("record", {"auction": 1}, 100),
        ("record", {"auction": 246}, 200),
        ("record", {"auction": 3}, 300),
        ("watermark", 250),
    ]
    # Reordering through a Table keeps the column, so each row keeps its own.
    descending = run(lambda b: pa.Table.from_batches([b]).sort_by([("price", "descending")]), batch)
    assert [(e[1]["price"], e[2]) for e in descending[:3]] == [(30, 300), (20, 200), (10, 100)]


@pytest.mark.parametrize("batch", inputs(timestamped=False), ids=["arrow", "dicts", "tuples"])
def test_without_event_time_nothing_is_added(batch: Any) -> None:
    seen: list[list[str]] = []

    def project(b: pa.RecordBatch) -> pa.RecordBatch:
        seen.append(b.schema.names)
        return b.filter(pc.greater(b["price"], 15)).select(["price"])

    assert run(project, batch) == [
        ("record", {"price": 20}, None),
        ("record", {"price": 30}, None),
        ("watermark", 250),
    ]
    assert seen == [["auction", "price"]]


def test_the_function_may_give_rows_event_time_by_making_the_column() -> None:
    def stamp(b: pa.RecordBatch) -> pa.RecordBatch:
        return b.append_column("_timestamp", pc.multiply(b["price"], 1000))

    assert run(stamp, inputs(timestamped=False)[0])[:2] == [
        ("record", {"auction": 1, "price": 10}, 10_000),
        ("record", {"auction": 246, "price": 20}, 20_000),
    ]


def test_the_output_is_columnar_and_converted_only_when_read() -> None:
    operator = MapBatchesOperator("mb", "MapBatches", q2)
    batches: list[Any] = []

    class Keep:
        def collect(self, batch: Any) -> None:
            batches.append(batch)

    operator.output = Keep()  # type: ignore[assignment]
    operator.process_batch(inputs(timestamped=True)[0])
    (out,) = batches
    assert type(out) is ColumnarBatch and not out.materialized
    assert out.data.schema.names == ["auction", "price"]
    assert out.timestamp_array.tolist() == [200]


def test_none_and_empty_results_emit_nothing() -> None:
    batch = inputs(timestamped=True)[0]
    assert run(lambda b: None, batch) == [("watermark", 250)]
    assert run(lambda b: b.slice(0, 0), batch) == [("watermark", 250)]


def test_a_function_object_is_opened_and_called_by_its_map_batches_method() -> None:
    class Top(Function):
        def open(self, runtime_context: Any) -> None:
            self.limit = 1

        def map_batches(self, batch: pa.RecordBatch) -> pa.RecordBatch:
            return batch.slice(0, self.limit)

    assert run(Top(), inputs(timestamped=True)[0]) == [
        ("record", {"auction": 1, "price": 10}, 100),
        ("watermark", 250),
    ]


def test_losing_which_row_came_from_where_is_an_error() -> None:
    with pytest.raises(ValueError, match="returned 1 rows for 3 and dropped the '_timestamp'"):
        run(lambda b: q2(b).select(["auction"]), inputs(timestamped=True)[0])


@pytest.mark.parametrize(
    ("function", "batch", "error", "message"),
    [
        (lambda b: b.to_pylist(), inputs(True)[0], TypeError, "returned a list"),
        (
            lambda b: b.set_column(2, "_timestamp", pa.array([1.5, 2.5, 3.5])),
            inputs(True)[0],
            TypeError,
            "must be integers",
        ),
        (
            lambda b: b,
            ColumnarBatch(pa.record_batch({"_timestamp": [1]}), [5]),
            ValueError,
            "already have a column '_timestamp'",
        ),
        (lambda b: b, RecordBatch([1, 2]), TypeError, "records of type int"),
    ],
)
def test_bad_input_and_output_are_errors_naming_the_problem(function, batch, error, message):
    with pytest.raises(error, match=message):
        run(function, batch)


def test_without_keeping_event_time_the_function_sees_no_column_and_rows_carry_none() -> None:
    seen: list[list[str]] = []

    def q2_projected(b: pa.RecordBatch) -> pa.RecordBatch:
        seen.append(b.schema.names)
        return q2(b).select(["price"])

    operator, out = started(
        MapBatchesOperator("mb", "MapBatches", q2_projected, keep_event_time=False), ManualClock()
    )
    operator.process_batch(inputs(timestamped=True)[0])
    assert out.take() == [("record", {"price": 20}, None)]
    assert seen == [["auction", "price"]]
