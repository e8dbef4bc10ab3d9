"""ColumnarBatch: records that stay an Arrow record batch until Python code needs them.

A source that reads Arrow data (and `map_batches`) emits a `ColumnarBatch`: a
`pyarrow.RecordBatch`, optionally an int64 numpy array of event timestamps (one per
row, `NO_TIMESTAMP` for a row without one), and a row converter. It has the same face
as `RecordBatch` (`values`, `timestamps`, `len`, `records()`), so every operator that
works on Python values keeps working: reading `values` converts the rows once
(`converter(data)`, by default `to_pylist()` dicts) and caches them; reading
`timestamps` gives a cached list. Columnar code reads `data` and `timestamp_array`
and never pays for either.

How the runtime treats it:

- the Arrow data is immutable and is the batch: partitioners slice or `take` it, a
  channel carries it as an Arrow frame (`network/codec.py`), a sink that can writes it
  as it is; `values` is a cache for Python code, read-only by contract (no operator
  forwards a batch whose values it changed: each builds a new batch of its outputs);
- `values` converts at most once per batch, however many operators of a chain read it;
- a batch that crosses a channel arrives with the same converter when that converter
  pickles by reference (a module-level function); otherwise it travels as its converted
  values, as a `RecordBatch` (codec.py says which frame).

>>> import pyarrow as pa
>>> batch = ColumnarBatch(pa.record_batch({"k": [1, 2]}), [10, 20])
>>> len(batch), batch.values, batch.timestamps
(2, [{'k': 1}, {'k': 2}], [10, 20])
>>> batch.take([1]).values
[{'k': 2}]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch

__all__ = [
    "AnyBatch",
    "ColumnarBatch",
    "RowConverter",
    "arrow_rows",
    "is_record_batch",
    "to_arrow",
]

RowConverter: TypeAlias = Callable[[pa.RecordBatch], list[Any]]
"""Turns an Arrow record batch into its rows as Python values, one per row, in order."""


def arrow_rows(data: pa.RecordBatch) -> list[Any]:
    """The default row converter: one dict (column -> value) per row.

    Equal to `data.to_pylist()`, about twice as fast: each column is converted at once and
    the rows zipped from the columns.

    >>> arrow_rows(pa.record_batch({"a": [1], "b": ["x"]}))
    [{'a': 1, 'b': 'x'}]
    """
    names = data.schema.names
    if not names or len(set(names)) != len(names):
        return data.to_pylist()
    columns = [column.to_pylist() for column in data.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


class ColumnarBatch:
    """An Arrow record batch, optional event timestamps, and how to make rows of it.

    Mailbox thread only. `data` and `timestamp_array` are never changed after
    construction; `values` and `timestamps` are computed on first read and cached.
    """

    __slots__ = ("_timestamps", "_values", "converter", "data", "timestamp_array")

    def __init__(
        self,
        data: pa.RecordBatch,
        timestamps: Any = None,
        converter: RowConverter = arrow_rows,
    ) -> None:
        """`timestamps`: None, or one int64 per row (a numpy array, list or Arrow array)."""
        if not isinstance(data, pa.RecordBatch):
            raise TypeError(f"a ColumnarBatch holds a pyarrow.RecordBatch, got {type(data)}")
        self.data = data
        self.converter = converter
        if timestamps is not None:
            timestamps = _int64_array(timestamps)
            if len(timestamps) != data.num_rows:
                raise ValueError(
                    f"{len(timestamps)} timestamps for a batch of {data.num_rows} rows"
                )
        self.timestamp_array: np.ndarray | None = timestamps
        self._values: list[Any] | None = None
        self._timestamps: list[int] | None = None

    def __len__(self) -> int:
        return self.data.num_rows

    def __repr__(self) -> str:
        stamped = "" if self.timestamp_array is None else ", timestamped"
        return f"ColumnarBatch({self.data.num_rows} rows{stamped}: {self.data.schema.names})"

    @property
    def values(self) -> list[Any]:
        """The rows as Python values (`converter(data)`), converted once."""
        values = self._values
        if values is None:
            values = self._values = self.converter(self.data)
            if len(values) != self.data.num_rows:
                raise ValueError(
                    f"the row converter {self.converter!r} made {len(values)} rows of a batch "
                    f"of {self.data.num_rows}"
                )
        return values

    @property
    def timestamps(self) -> list[int] | None:
        """The timestamps as a list of ints (`RecordBatch.timestamps`), made once."""
        if self.timestamp_array is None:
            return None
        stamps = self._timestamps
        if stamps is None:
            stamps = self._timestamps = self.timestamp_array.tolist()
        return stamps

    @property
    def materialized(self) -> bool:
        """Whether `values` has been read (the rows exist as Python objects)."""
        return self._values is not None

    def records(self) -> Any:
        """(value, timestamp or None) pairs, for tests and slow paths."""
        return RecordBatch(self.values, self.timestamps).records()

    def take(self, indices: Any) -> ColumnarBatch:
        """The rows at `indices` (in that order), with their timestamps and converter."""
        indices = np.asarray(indices, dtype=np.int64)
        stamps = self.timestamp_array
        return ColumnarBatch(
            self.data.take(pa.array(indices)),
            None if stamps is None else stamps[indices],
            self.converter,
        )

    def slice(self, start: int, stop: int) -> ColumnarBatch:
        """Rows `start` to `stop` (zero-copy), with their timestamps and converter."""
        stamps = self.timestamp_array
        return ColumnarBatch(
            self.data.slice(start, stop - start),
            None if stamps is None else stamps[start:stop],
            self.converter,
        )


AnyBatch: TypeAlias = RecordBatch | ColumnarBatch
"""What operators and outputs are handed: both have `values`, `timestamps`, `len`."""


def is_record_batch(element: Any) -> bool:
    """Whether a polled element is records (either kind of batch), not an event."""
    kind = type(element)
    return kind is RecordBatch or kind is ColumnarBatch


def to_arrow(batch: AnyBatch) -> tuple[pa.RecordBatch, np.ndarray | None]:
    """A batch's rows as Arrow data and its timestamps as an int64 array (or None).

    A `RecordBatch` is converted with `pa.RecordBatch.from_pylist`: its values must be
    dicts (column -> value) or NamedTuples. Rows need not all have the same keys or type:
    every key or field of any row is a column, null in the rows without it.

    >>> data, stamps = to_arrow(RecordBatch([{"a": 1}, {"a": 2}], [5, 6]))
    >>> data.to_pydict(), stamps.tolist()
    ({'a': [1, 2]}, [5, 6])
    >>> to_arrow(RecordBatch([{"a": 1}, {"a": 2, "b": "x"}], None))[0].to_pydict()
    {'a': [1, 2], 'b': [None, 'x']}
    """
    if type(batch) is ColumnarBatch:
        return batch.data, batch.timestamp_array
    values = batch.values
    stamps = None if batch.timestamps is None else _int64_array(batch.timestamps)
    first = values[0] if values else None
    if first is not None and not isinstance(first, dict) and hasattr(first, "_asdict"):
        kinds = list(dict.fromkeys(map(type, values)))
        values = [value._asdict() for value in values]
        if len(kinds) > 1:  # from_pylist would keep only the first row's fields
            fields = dict.fromkeys(name for kind in kinds for name in kind._fields)
            what = f"records of types {', '.join(kind.__name__ for kind in kinds)}"
            return _rows_of_keys(values, list(fields), what), stamps
    elif isinstance(first, dict) and set(map(type, values)) == {dict}:
        names = list(dict.fromkeys(chain.from_iterable(values)))
        if len(names) > len(first):  # from_pylist would keep only the first row's keys
            return _rows_of_keys(values, names, "dict rows"), stamps
    try:
        return pa.RecordBatch.from_pylist(values), stamps
    except (pa.ArrowException, TypeError, ValueError, AttributeError) as error:
        kinds = sorted({type(value).__name__ for value in values[:100]})
        raise TypeError(
            f"cannot make an Arrow batch of records of type {', '.join(kinds)}: {error}. "
            "Columnar operators take dict rows (column -> value), NamedTuples or Arrow data"
        ) from None


def _rows_of_keys(values: Sequence[dict], names: list[str], what: str) -> pa.RecordBatch:
    """Dict rows with different keys (NamedTuples of several types, as dicts) as one
    batch: every key a column, in `names`' order, null where a row lacks it."""
    try:
        return pa.RecordBatch.from_pydict(
            {name: [row.get(name) for row in values] for name in names}
        )
    except (pa.ArrowException, TypeError, ValueError) as error:
        raise TypeError(f"cannot make an Arrow batch of {what}: {error}") from None


def _int64_array(timestamps: Any) -> np.ndarray:
    if isinstance(timestamps, pa.Array | pa.ChunkedArray):
        if timestamps.null_count:
            timestamps = timestamps.fill_null(NO_TIMESTAMP)
        timestamps = timestamps.to_numpy(zero_copy_only=False)
    if isinstance(timestamps, Sequence) and not isinstance(timestamps, np.ndarray):
        return np.fromiter(timestamps, dtype=np.int64, count=len(timestamps))
    return np.asarray(timestamps, dtype=np.int64)
