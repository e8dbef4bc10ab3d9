"""IcebergSource's reader driven poll by poll against a real SQLite-backed Iceberg catalog:
appended snapshots in order, new ones found once the monitor interval passed on a manual
clock, the position (last snapshot read, files and rows of the next) restored mid-file,
the start by strategy, snapshot id or timestamp, a bounded end; overwrite and delete
snapshots upstream fail the reader naming them, or are passed over when the source says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.iceberg_catalog import catalog_properties, open_catalog

from barrierflow._clock import ManualClock
from barrierflow.connectors.iceberg import IcebergSource
from barrierflow.errors import ConfigurationError, SourceError

pytest.importorskip("pyiceberg")

SCHEMA = pa.schema([("n", pa.int64())])


@pytest.fixture
def lake(tmp_path: Path) -> tuple[dict[str, str], Any]:
    props = catalog_properties(tmp_path / "lake")
    catalog = open_catalog(props)
    catalog.create_namespace("db")
    return props, catalog.create_table("db.t", SCHEMA)


def append(table: Any, *values: int) -> int:
    """Another writer appends `values` in one snapshot; its id."""
    table.append(pa.table({"n": list(values)}, schema=SCHEMA))
    return table.current_snapshot().snapshot_id


def drain(reader: Any, max_records: int = 100) -> list[int]:
    """Poll until the reader has nothing more now (an empty, unfinished batch)."""
    seen: list[int] = []
    for _ in range(100):
        batch = reader.poll_split_batch(max_records)
        if batch is None or batch.finished:
            return seen
        records = batch.records
        if len(records) == 0 and not _more_queued(reader):
            return seen
        seen.extend(row["n"] for row in (records.to_pylist() if len(records) else []))
    raise AssertionError("the reader never stopped")


def _more_queued(reader: Any) -> bool:
    return bool(reader._queue)


def reader_of(source: IcebergSource, clock: ManualClock, positions: dict | None = None) -> Any:
    made = source.create_reader(source.create_splits(), clock=clock)
    made.restore(positions or {})
    return made


def test_it_follows_a_table_another_writer_appends_to(lake):
    props, table = lake
    append(table, 1, 2)
    append(table, 3)
    clock = ManualClock()
    reader = reader_of(IcebergSource.for_table("db.t", props).monitor_interval(5), clock)
    assert drain(reader) == [1, 2, 3]
    append(table, 4, 5)
    assert drain(reader) == []  # the interval has not passed: the catalog is not asked
    clock.advance(5_000)
    assert drain(reader) == [4, 5]
    append(table, 6)
    clock.advance(5_000)
    assert drain(reader) == [6]


def test_a_restore_goes_on_at_the_row_after_the_checkpoint(lake):
    props, table = lake
    append(table, 1, 2, 3)
    append(table, 4)
    clock = ManualClock()
    source = IcebergSource.for_table("db.t", props)
    reader = reader_of(source, clock)
    assert reader.poll_split_batch(2).records.to_pylist() == [{"n": 1}, {"n": 2}]
    saved = reader.snapshot()
    assert drain(reader) == [3, 4]
    again = reader_of(source, clock, saved)
    assert drain(again) == [3, 4]
    saved = again.snapshot()
    assert saved["db.t"]["done"] == table.current_snapshot().snapshot_id
    append(table, 5)
    clock.advance(1_000)
    assert drain(reader_of(source, clock, saved)) == [5]


def test_where_it_starts_and_where_a_bounded_source_ends(lake):
    props, table = lake
    first = append(table, 1)
    second = append(table, 2)
    third = append(table, 3)
    clock = ManualClock()
    source = IcebergSource.for_table("db.t", props)
    assert drain(reader_of(source.starting_strategy("latest"), clock)) == []
    assert drain(reader_of(source.start_snapshot_id(second), clock)) == [2, 3]
    stamp = table.snapshot_by_id(third).timestamp_ms
    assert drain(reader_of(source.start_snapshot_timestamp(stamp), clock)) == [3]
    bounded = source.start_snapshot_id(first).end_snapshot_id(second)
    reader = reader_of(bounded, clock)
    assert drain(reader) == [1, 2]
    assert reader.poll_split_batch(10).finished  # the split ends, then the input
    assert reader.poll_split_batch(10) is None
    with pytest.raises(SourceError, match="snapshot 7 is not in the history"):
        source.start_snapshot_id(7).create_splits()
    with pytest.raises(SourceError, match=r"'db\.nope' does not exist"):
        IcebergSource.for_table("db.nope", props).create_splits()


def rows_then_failure(reader: Any) -> tuple[list[int], str | None]:
    """Drain `reader`: the rows it read, and the error it then failed with (or None)."""
    seen: list[int] = []
    for _ in range(100):
        try:
            batch = reader.poll_split_batch(100)
        except SourceError as error:
            return seen, str(error)
        if batch is None or batch.finished:
            return seen, None
        if len(batch.records) == 0 and not _more_queued(reader):
            return seen, None
        seen.extend(row["n"] for row in (batch.records.to_pylist() if len(batch.records) else []))
    raise AssertionError("the reader never stopped")


# (skip overwrites, skip deletes, rows read, the snapshot it fails at, its operation)
UPSTREAM = [
    (False, False, [1, 2, 3], "partial", "overwrite"),
    (True, False, [1, 2, 3], "whole", "delete"),
    (False, True, [1, 2, 3], "partial", "overwrite"),
    (True, True, [1, 2, 3, 4], None, None),
]


@pytest.mark.parametrize(("overwrites", "deletes", "read", "fails_at", "operation"), UPSTREAM)
def test_an_overwrite_or_delete_upstream_fails_naming_it_unless_skipped(
    lake, overwrites, deletes, read, fails_at, operation
):
    props, table = lake
    append(table, 1, 2)
    append(table, 3)
    table.delete("n = 1")  # rewrites the first file without 1: an overwrite snapshot
    snapshots = {"partial": table.current_snapshot().snapshot_id}
    table.delete("n = 3")  # drops the second file whole: a delete snapshot
    snapshots["whole"] = table.current_snapshot().snapshot_id
    append(table, 4)
    source = IcebergSource.for_table("db.t", props)
    if overwrites:
        source = source.streaming_skip_overwrite_snapshots()
    if deletes:
        source = source.streaming_skip_delete_snapshots()
    clock = ManualClock()
    reader = reader_of(source, clock)
    got, error = rows_then_failure(reader)
    assert got == read
    if fails_at is None:
        assert error is None
        return
    assert error == (
        f"IcebergSource 'db.t': snapshot {snapshots[fails_at]} is "
        f"{'an' if operation == 'overwrite' else 'a'} '{operation}' snapshot: it "
        + ("rewrites or deletes rows" if operation == "overwrite" else "deletes data files")
        + ", which appended rows cannot retract; "
        f"set .streaming_skip_{operation}_snapshots() to pass such snapshots over"
    )
    # a restart fails at the same snapshot; told to skip both, it goes on from there
    assert rows_then_failure(reader_of(source, clock, reader.snapshot()))[1] == error
    both = source.streaming_skip_overwrite_snapshots().streaming_skip_delete_snapshots()
    assert rows_then_failure(reader_of(both, clock, reader.snapshot())) == ([4], None)


def test_the_skip_settings_take_a_flag(lake):
    props, _ = lake
    source = IcebergSource.for_table("db.t", props)
    assert not source.skip_overwrites and not source.skip_deletes
    skipping = source.streaming_skip_overwrite_snapshots().streaming_skip_delete_snapshots()
    assert skipping.skip_overwrites and skipping.skip_deletes
    assert not skipping.streaming_skip_delete_snapshots(False).skip_deletes
    with pytest.raises(ConfigurationError, match="streaming_skip_delete_snapshots takes True"):
        source.streaming_skip_delete_snapshots("yes")
