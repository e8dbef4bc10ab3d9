"""Event time read a batch at a time: a timestamp column, and what a watermark generator needs.

`WatermarkStrategy.with_timestamp_column(column)` names where a record's event time is:
a column name, or a function `pyarrow.RecordBatch -> int64 array` (one per row).

- Arrow data (`column_timestamps`): the column is cast once per batch. Integer columns
  are epoch milliseconds; `timestamp` and `date64` columns are converted to epoch
  milliseconds (sub-millisecond parts dropped). Nulls, a missing column or another type
  are errors naming the column.
- Python rows (`row_timestamps`): a name reads `row[name]` from a dict and the attribute
  of anything else (a NamedTuple, a dataclass); ints are epoch milliseconds, `datetime`s
  are converted (naive ones count as UTC). A function is given the rows as Arrow
  (`pyarrow.RecordBatch.from_pylist`).

Watermarks: the built-in generators (bounded out-of-orderness, monotonous, none, with or
without idleness) only keep the greatest timestamp they saw, so feeding them a batch's
maximum once gives exactly what feeding every record gives (`summarizes_batches`). A
custom generator (`for_generator`) still sees every record with its timestamp.

>>> import pyarrow as pa
>>> column_timestamps(pa.record_batch({"t": [3, 1]}), "t").tolist()
[3, 1]
>>> row_timestamps([{"t": 3}, {"t": 1}], "t")
[3, 1]
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from barrierflow.core.watermark_strategy import WatermarkStrategy
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import to_arrow

__all__ = ["column_timestamps", "row_timestamps", "summarizes_batches"]

TimestampColumn = str | Callable[[pa.RecordBatch], Any]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def summarizes_batches(strategy: WatermarkStrategy) -> bool:
    """Whether the strategy's generators depend only on the greatest timestamp they see.

    >>> from barrierflow.core.watermark_strategy import NoWatermarksGenerator
    >>> summarizes_batches(WatermarkStrategy.for_monotonous_timestamps())
    True
    >>> summarizes_batches(WatermarkStrategy.for_generator(NoWatermarksGenerator))
    False
    """
    return strategy.kind != "generator"


def column_timestamps(data: pa.RecordBatch, column: TimestampColumn) -> np.ndarray:
    """One int64 epoch-millisecond timestamp per row of `data`."""
    if callable(column):
        produced = column(data)
        stamps = _as_int64(produced, f"the timestamp function {column!r}")
        if len(stamps) != data.num_rows:
            raise ValueError(
                f"the timestamp function {column!r} returned {len(stamps)} timestamps for "
                f"a batch of {data.num_rows} rows"
            )
        return stamps
    index = data.schema.get_field_index(column)
    if index < 0:
        raise KeyError(
            f"the timestamp column {column!r} is not among the batch's columns {data.schema.names}"
        )
    return _as_int64(data.column(index), f"the timestamp column {column!r}")


def row_timestamps(values: list[Any], column: TimestampColumn) -> list[int]:
    """One epoch-millisecond timestamp per row of `values` (Python objects)."""
    if callable(column):
        if not values:
            return []
        return column_timestamps(to_arrow(RecordBatch(values))[0], column).tolist()
    stamps = []
    for value in values:
        try:
            stamp = value[column] if type(value) is dict else getattr(value, column)
        except (KeyError, AttributeError):
            raise KeyError(
                f"the timestamp column {column!r} is missing from a record: {value!r:.200}"
            ) from None
        if type(stamp) is not int:
            stamp = _python_millis(stamp, column)
        stamps.append(stamp)
    return stamps


def _as_int64(array: Any, what: str) -> np.ndarray:
    if not isinstance(array, pa.Array | pa.ChunkedArray):
        stamps = np.asarray(array)
        if stamps.dtype.kind not in "iu":
            raise TypeError(f"{what} gave values of type {stamps.dtype}, not integers")
        return stamps.astype(np.int64, copy=False)
    if array.null_count:
        raise ValueError(f"{what} has {array.null_count} null value(s): every row needs one")
    kind = array.type
    if pa.types.is_timestamp(kind):
        if kind.unit != "ms":
            array = pc.cast(array, pa.timestamp("ms", kind.tz), safe=False)
        array = array.cast(pa.int64())
    elif pa.types.is_date64(kind):
        array = array.cast(pa.int64())
    elif pa.types.is_integer(kind):
        if kind != pa.int64():
            array = array.cast(pa.int64())
    else:
        raise TypeError(
            f"{what} is of type {kind}: event time needs integer epoch milliseconds, "
            "a timestamp or a date64 column"
        )
    return array.to_numpy(zero_copy_only=False)


def _python_millis(stamp: Any, column: str) -> int:
    if isinstance(stamp, dt.datetime):
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.UTC)
        return (stamp - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(stamp, int) and not isinstance(stamp, bool):
        return int(stamp)
    raise TypeError(
        f"the timestamp column {column!r} holds {stamp!r} of type {type(stamp).__name__}: "
        "event time needs integer epoch milliseconds or a datetime"
    )
