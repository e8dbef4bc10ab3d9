"""map_batches: one user function per Arrow record batch (map, filter and project in one).

Like Spark's `mapInArrow` and Ray Data's `map_batches`: the function takes a
`pyarrow.RecordBatch` and returns a `RecordBatch`, a `Table` or None (nothing), so a
stateless step runs in Arrow's compute kernels with no Python work per record. A
`ColumnarBatch` is handed over as its Arrow data; a `RecordBatch` of Python rows (dicts
or NamedTuples) is converted with `pa.RecordBatch.from_pylist` first. The output leaves
as a `ColumnarBatch` whose rows, if Python code downstream reads them, are dicts.

Event time follows rows through one column, `_timestamp` (int64, epoch milliseconds):

- when the input records carry timestamps, the function's batch has them as its last
  column `_timestamp`; what the function keeps of that column are the output rows'
  timestamps. Filtering (`batch.filter(mask)`), sorting, `take` and adding or replacing
  other columns keep it, so rows keep their event time without the function knowing;
- an output without the column but with as many rows as the input is a row-for-row map
  or a projection (`batch.select([...])`): row i keeps input row i's timestamp;
- an output without the column and with another number of rows is an error: which row
  came from where is unknown;
- an output of a function whose input had no timestamps has them only if it made the
  column itself. The column never reaches the output's data;
- with `keep_event_time=False` the function never sees the column and its output rows
  carry no event time (unless it makes the column): for steps after which nothing uses
  event time, so a filter may also project freely.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from barrierflow.runtime.columnar import AnyBatch, ColumnarBatch, to_arrow
from barrierflow.runtime.operators.stateless import _UserFunctionOperator

__all__ = ["TIMESTAMP_COLUMN", "MapBatchesOperator"]

TIMESTAMP_COLUMN = "_timestamp"
"""The column through which a map_batches function sees and keeps its rows' event time."""


class MapBatchesOperator(_UserFunctionOperator):
    """Applies `function(pyarrow.RecordBatch) -> RecordBatch | Table | None` per batch."""

    method, kind = "map_batches", "MapBatchesFunction"

    def __init__(self, uid: str, name: str, function: Any, keep_event_time: bool = True) -> None:
        super().__init__(uid, name, function)
        self.keep_event_time = keep_event_time

    def process_batch(self, batch: AnyBatch) -> None:
        data, stamps = to_arrow(batch)
        if not self.keep_event_time:
            stamps = None
        if stamps is not None:
            if data.schema.get_field_index(TIMESTAMP_COLUMN) >= 0:
                raise ValueError(
                    f"{self.name}: the records already have a column {TIMESTAMP_COLUMN!r}, "
                    "the name map_batches gives their event time: rename it"
                )
            data = data.append_column(TIMESTAMP_COLUMN, pa.array(stamps, pa.int64()))
        produced = self._call(data)
        if produced is None:
            return
        for out in self._batches_of(produced):
            self._emit(out, stamps, data.num_rows)

    def _batches_of(self, produced: Any) -> list[pa.RecordBatch]:
        if isinstance(produced, pa.RecordBatch):
            return [produced] if produced.num_rows else []
        if isinstance(produced, pa.Table):
            return [b for b in produced.combine_chunks().to_batches() if b.num_rows]
        raise TypeError(
            f"{self.name}: the map_batches function {self.function!r} returned a "
            f"{type(produced).__name__}: it must return a pyarrow.RecordBatch, a Table or None"
        )

    def _emit(self, out: pa.RecordBatch, stamps: np.ndarray | None, rows_in: int) -> None:
        index = out.schema.get_field_index(TIMESTAMP_COLUMN)
        if index >= 0:
            column = out.column(index)
            if column.null_count or not pa.types.is_integer(column.type):
                raise TypeError(
                    f"{self.name}: the output's {TIMESTAMP_COLUMN!r} column must be integers "
                    f"without nulls (epoch milliseconds), got {column.type} with "
                    f"{column.null_count} null(s)"
                )
            self.output.collect(ColumnarBatch(out.remove_column(index), column))
        elif stamps is None:
            self.output.collect(ColumnarBatch(out))
        elif out.num_rows == rows_in:
            self.output.collect(ColumnarBatch(out, stamps))
        else:
            raise ValueError(
                f"{self.name}: the map_batches function returned {out.num_rows} rows for "
                f"{rows_in} and dropped the {TIMESTAMP_COLUMN!r} column, so the rows' event "
                f"time is lost: keep that column (filter, sort and take keep it; select it "
                f"with the others), return one row per input row, or pass "
                "keep_event_time=False when nothing downstream needs event time"
            )
