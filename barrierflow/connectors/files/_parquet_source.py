"""ParquetSource: Parquet files read as Arrow record batches, which stay columnar in the job.

Each row group of each file is a split (so a single large file still spreads over the
subtasks); a split's position is the number of its rows already emitted, so a restore
re-reads its row group and skips them. Records leave as `ColumnarBatch`es (rows, when
Python code reads them, are `to_pylist()` dicts, or what `converter` makes); give event
time with `WatermarkStrategy.with_timestamp_column`.

>>> import pathlib, tempfile, pyarrow as pa, pyarrow.parquet as pq
>>> path = pathlib.Path(tempfile.mkdtemp()) / "bids.parquet"
>>> pq.write_table(pa.table({"auction": [1, 2, 3]}), path, row_group_size=2)
>>> source = ParquetSource(str(path))
>>> [split.split_id for split in source.create_splits()]
['bids.parquet#0', 'bids.parquet#1']
>>> reader = source.create_reader(source.create_splits())
>>> reader.restore({"bids.parquet#0": 1})
>>> polled = reader.poll_split_batch(100)
>>> polled.split_id, polled.records.to_pydict(), polled.finished
('bids.parquet#0', {'auction': [2]}, True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from barrierflow import _fs
from barrierflow.connectors.base import Source, SourceReader, SourceSplit, SplitBatch
from barrierflow.errors import SourceError

__all__ = ["ParquetSource"]

DEFAULT_BATCH_ROWS = 8192
"""Rows per emitted batch: an Arrow batch costs Python work per batch, not per row, so it
may be larger than the task's buffer of Python records."""


class ParquetSource(Source):
    """A Parquet file, or a folder of them, read once (bounded), a row group per split."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        columns: Sequence[str] | None = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        converter: Callable[[pa.RecordBatch], list[Any]] | None = None,
    ) -> None:
        """`columns`: read only these; `converter`: the rows Python code sees (a
        module-level function keeps batches columnar across channels)."""
        if batch_rows <= 0:
            raise ValueError(f"batch_rows must be positive, got {batch_rows}")
        self.root = _fs.location(path)
        self.columns = list(columns) if columns is not None else None
        self.batch_rows = batch_rows
        self.converter = converter

    def storage_locations(self) -> list[str]:
        return [self.root.uri]

    def create_splits(self) -> list[SourceSplit]:
        try:
            if _fs.is_file(self.root):
                files = [(self.root.path.rstrip("/").rsplit("/", 1)[-1], self.root)]
            elif _fs.is_dir(self.root):
                files = [
                    (relative, self.root.child(relative))
                    for relative in _fs.list_files_recursive(self.root)
                    if relative.endswith(".parquet")
                ]
            else:
                raise SourceError(f"the source path {self.root} does not exist")
            splits = []
            for name, loc in files:
                with _fs.open_input_file(loc) as stream:
                    groups = pq.ParquetFile(stream).metadata.num_row_groups
                splits.extend(SourceSplit(f"{name}#{g}", (loc.uri, g)) for g in range(groups))
            return splits
        except (OSError, pa.ArrowException) as error:
            raise SourceError(f"the Parquet source {self.root} cannot be read: {error}") from None

    def create_reader(self, splits: Sequence[SourceSplit]) -> ParquetReader:
        return ParquetReader(list(splits), self.columns, self.batch_rows, self.converter)


class ParquetReader(SourceReader):
    """Reads its splits (row groups) one after another. Mailbox thread only."""

    def __init__(
        self,
        splits: list[SourceSplit],
        columns: list[str] | None,
        batch_rows: int,
        converter: Callable[[pa.RecordBatch], list[Any]] | None,
    ) -> None:
        self._splits = splits
        self._columns = columns
        self._batch_rows = batch_rows
        self._converter = converter
        self._positions: dict[str, int] = {split.split_id: 0 for split in splits}
        self._done: set[str] = set()
        self._current: tuple[SourceSplit, Iterator[pa.RecordBatch], int] | None = None
        self._stream: Any = None

    def restore(self, positions: dict[str, Any]) -> None:
        for split_id in self._positions:
            self._positions[split_id] = int(positions.get(split_id, 0))

    def split_ids(self) -> list[str]:
        return [split.split_id for split in self._splits]

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        polled = self.poll_split_batch(max_records)
        return None if polled is None else polled.records.to_pylist()

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        if self._current is None and not self._open_next():
            return None
        assert self._current is not None
        split, batches, rows = self._current
        split_id = split.split_id
        data = next(batches, None)
        if data is None:
            return self._finish(split_id)
        self._positions[split_id] += data.num_rows
        finished = self._positions[split_id] >= rows
        if finished:
            self._close_current(split_id)
        return SplitBatch(split_id, data, finished=finished, converter=self._converter)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _open_next(self) -> bool:
        for split in self._splits:
            if split.split_id in self._done:
                continue
            uri, group = split.payload
            try:
                self._stream = _fs.open_input_file(_fs.location(uri))
                parquet = pq.ParquetFile(self._stream)
                rows = parquet.metadata.row_group(group).num_rows
                skip = self._positions[split.split_id]
                batches = _skipping(
                    parquet.iter_batches(
                        batch_size=self._batch_rows, row_groups=[group], columns=self._columns
                    ),
                    skip,
                )
            except (OSError, pa.ArrowException) as error:
                raise SourceError(f"cannot read {uri} (row group {group}): {error}") from None
            self._current = (split, batches, rows)
            if skip >= rows:
                self._current = (split, iter(()), rows)
            return True
        return False

    def _finish(self, split_id: str) -> SplitBatch:
        self._close_current(split_id)
        return SplitBatch(split_id, [], finished=True)

    def _close_current(self, split_id: str) -> None:
        self._done.add(split_id)
        self._current = None
        self.close()


def _skipping(batches: Iterator[pa.RecordBatch], skip: int) -> Iterator[pa.RecordBatch]:
    for data in batches:
        if skip >= data.num_rows:
            skip -= data.num_rows
            continue
        yield data.slice(skip) if skip else data
        skip = 0
