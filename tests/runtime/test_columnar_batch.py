"""ColumnarBatch: Arrow data with lazily converted rows, and how existing operators take it."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow.core.functions import KeyedProcessFunction
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.columnar import ColumnarBatch, is_record_batch, to_arrow
from barrierflow.runtime.operators.keyed import KeyedProcessOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator


class Bid(NamedTuple):
    auction: int
    price: int


def bids(data: pa.RecordBatch) -> list[Any]:
    return [Bid(*row) for row in zip(*(c.to_pylist() for c in data.columns), strict=True)]


class CountingConverter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, data: pa.RecordBatch) -> list[Any]:
        self.calls += 1
        return data.to_pylist()


DATA = pa.record_batch({"auction": [1, 2, 3], "price": [10, 20, 30]})


def test_values_are_converted_once_and_cached() -> None:
    converter = CountingConverter()
    batch = ColumnarBatch(DATA, None, converter)
    assert not batch.materialized
    assert len(batch) == 3 and converter.calls == 0
    assert batch.values == [
        {"auction": 1, "price": 10},
        {"auction": 2, "price": 20},
        {"auction": 3, "price": 30},
    ]
    assert batch.values is batch.values
    assert converter.calls == 1 and batch.materialized
    assert batch.timestamps is None
    assert list(batch.records()) == [(row, None) for row in batch.values]


def test_timestamps_are_an_int64_array_and_a_cached_list() -> None:
    batch = ColumnarBatch(DATA, pa.array([5, None, 7], pa.int64()))
    assert batch.timestamp_array.dtype == np.int64
    assert batch.timestamps == [5, NO_TIMESTAMP, 7]
    assert batch.timestamps is batch.timestamps
    assert [ts for _, ts in batch.records()] == [5, None, 7]


def test_a_converter_gives_the_sources_own_rows() -> None:
    batch = ColumnarBatch(DATA, [1, 2, 3], bids)
    assert batch.values == [Bid(1, 10), Bid(2, 20), Bid(3, 30)]
    taken = batch.take([2, 0])
    assert taken.values == [Bid(3, 30), Bid(1, 10)] and taken.timestamps == [3, 1]
    sliced = batch.slice(1, 3)
    assert sliced.values == [Bid(2, 20), Bid(3, 30)] and sliced.timestamps == [2, 3]


def test_bad_construction_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="2 timestamps for a batch of 3 rows"):
        ColumnarBatch(DATA, [1, 2])
    with pytest.raises(TypeError, match=r"pyarrow\.RecordBatch"):
        ColumnarBatch([{"a": 1}])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="made 1 rows of a batch of 3"):
        _ = ColumnarBatch(DATA, None, lambda data: [1]).values


def test_both_kinds_count_as_records() -> None:
    assert is_record_batch(RecordBatch([1])) and is_record_batch(ColumnarBatch(DATA))
    assert not is_record_batch([1])


def test_to_arrow_takes_dicts_and_named_tuples_and_names_what_it_cannot() -> None:
    data, stamps = to_arrow(RecordBatch([Bid(1, 2)], [9]))
    assert data.to_pylist() == [{"auction": 1, "price": 2}] and stamps.tolist() == [9]
    columnar = ColumnarBatch(DATA)
    assert to_arrow(columnar)[0] is DATA
    with pytest.raises(TypeError, match="records of type int"):
        to_arrow(RecordBatch([1, 2]))


def test_dict_rows_with_keys_the_first_row_lacks_keep_every_key() -> None:
    # pyarrow's from_pylist takes the first row's keys as the schema and drops the rest
    rows = [{"a": 1}, {"a": 2, "b": "x"}, {"c": 3.5}]
    data, _ = to_arrow(RecordBatch(rows))
    assert data.to_pylist() == [
        {"a": 1, "b": None, "c": None},
        {"a": 2, "b": "x", "c": None},
        {"a": None, "b": None, "c": 3.5},
    ]
    with pytest.raises(TypeError, match="dict rows"):
        to_arrow(RecordBatch([{"a": 1}, {"a": "text", "b": 2}]))


@pytest.mark.parametrize("stamps", [None, [100, 200, 300]])
def test_existing_operators_treat_a_columnar_batch_as_its_rows(stamps: list[int] | None) -> None:
    """Map, filter, flat_map and a keyed process see the converter's rows with their
    timestamps, exactly as they see a RecordBatch of the same rows."""

    class Echo(KeyedProcessFunction):
        def process_element(self, value: Any, ctx: Any) -> Any:
            yield (ctx.get_current_key(), value.price, ctx.timestamp())

    def run(batch: Any) -> list[list[tuple[Any, ...]]]:
        outputs = []
        for operator in (
            MapOperator("m", "Map", lambda bid: bid.price * 2),
            FilterOperator("f", "Filter", lambda bid: bid.auction != 2),
            FlatMapOperator("fm", "FlatMap", lambda bid: [bid.auction] * bid.auction),
            KeyedProcessOperator("k", "Keyed", lambda bid: bid.auction, Echo()),
        ):
            op, out = started(operator, ManualClock())
            op.process_batch(batch)
            outputs.append(out.take())
        return outputs

    calls = []

    def converter(data: pa.RecordBatch) -> list[Any]:
        calls.append(1)
        return bids(data)

    columnar = ColumnarBatch(DATA, stamps, converter)
    as_rows = RecordBatch(bids(DATA), None if stamps is None else list(stamps))
    assert run(columnar) == run(as_rows)
    assert len(calls) == 1  # four operators read it; converted once


def test_the_default_rows_equal_to_pylist_for_any_columns() -> None:
    data = pa.record_batch(
        {
            "n": pa.array([1, None], pa.int64()),
            "s": ["x", None],
            "nested": pa.array([{"a": 1}, None]),
            "list": pa.array([[1, 2], []]),
        }
    )
    assert ColumnarBatch(data).values == data.to_pylist()
    no_columns = pa.RecordBatch.from_pydict({}).__class__.from_arrays([], names=[])
    assert ColumnarBatch(no_columns).values == no_columns.to_pylist()
