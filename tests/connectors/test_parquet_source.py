"""ParquetSource: a row group per split, positions in rows, Arrow batches out."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from barrierflow.connectors.files import ParquetSource
from barrierflow.errors import SourceError


def drain(reader, max_records: int = 100) -> list:
    polled = []
    while (batch := reader.poll_split_batch(max_records)) is not None:
        polled.append(batch)
    return polled


def test_a_folder_reads_every_row_group_of_every_file_once(tmp_path: Path) -> None:
    pq.write_table(pa.table({"n": list(range(5))}), tmp_path / "a.parquet", row_group_size=2)
    pq.write_table(pa.table({"n": list(range(5, 8))}), tmp_path / "b.parquet")
    (tmp_path / "notes.txt").write_text("not parquet")
    source = ParquetSource(str(tmp_path), batch_rows=1)
    splits = source.create_splits()
    assert [s.split_id for s in splits] == [
        "a.parquet#0",
        "a.parquet#1",
        "a.parquet#2",
        "b.parquet#0",
    ]
    reader = source.create_reader(splits)
    reader.restore({})
    polled = drain(reader)
    values = [v for b in polled if len(b.records) for v in b.records["n"].to_pylist()]
    assert values == list(range(8))
    assert all(isinstance(b.records, pa.RecordBatch) for b in polled if len(b.records))
    assert [b.split_id for b in polled if b.finished] == [s.split_id for s in splits]
    assert reader.snapshot() == {
        "a.parquet#0": 2,
        "a.parquet#1": 2,
        "a.parquet#2": 1,
        "b.parquet#0": 3,
    }


def test_a_restored_reader_skips_what_was_emitted(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"n": list(range(6)), "s": list("abcdef")}),
        tmp_path / "t.parquet",
        row_group_size=3,
    )
    source = ParquetSource(str(tmp_path / "t.parquet"), columns=["n"], batch_rows=2)
    reader = source.create_reader(source.create_splits())
    reader.restore({"t.parquet#0": 3, "t.parquet#1": 1})
    polled = drain(reader)
    assert [v for b in polled if len(b.records) for v in b.records.to_pylist()] == [
        {"n": 4},
        {"n": 5},
    ]


def test_a_missing_path_is_a_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        ParquetSource(str(tmp_path / "nothing")).create_splits()
