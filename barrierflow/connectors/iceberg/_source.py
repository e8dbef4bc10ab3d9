"""IcebergSource: a table's appended snapshots read incrementally, as a stream.

One split per table (the split id is the table's name, so positions carry over between
runs). Its reader walks the main branch's ancestry from its position: every `append`
snapshot after the last one it read fully, oldest first, and within each the data files
that snapshot added (sorted by path), read through PyIceberg's Arrow reader. A `replace`
(compaction) changes no rows and is passed over. An `overwrite` or a `delete` changes rows
the stream may have sent already, which appended rows cannot retract: the reader fails
naming the snapshot and its operation, unless told to pass such snapshots over (whole,
with any rows they add), as Iceberg's Spark streaming reader does with its
`streaming-skip-overwrite-snapshots` and `streaming-skip-delete-snapshots` options (Flink's
Iceberg source reads appends only and passes every other snapshot over silently). Its
position, in every checkpoint, is the last snapshot read fully, the snapshot being read,
the files of it read fully and the rows of the next: a restore goes on at the same row.

Unbounded by default: when it has read everything it looks for new snapshots every
`monitor_interval` seconds (timed on the source's `clock`, never slept on). Bounded with
`end_snapshot_id` (or `end_at_latest`): it ends after that snapshot.

Assumes what it reads stays: a snapshot expired while the source is behind it, or a
rollback that drops the last snapshot read from the ancestry, fails the job, naming it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import (
    WHOLE_READER_SPLIT,
    Source,
    SourceReader,
    SourceSplit,
    SplitBatch,
)
from barrierflow.connectors.iceberg._catalog import connect, load_table, pyiceberg
from barrierflow.errors import ConfigurationError, SourceError

__all__ = ["DEFAULT_MONITOR_INTERVAL_S", "IcebergSource"]

DEFAULT_MONITOR_INTERVAL_S = 1.0
"""How often an unbounded reader that has read everything asks the catalog for new snapshots."""

_STARTS = ("earliest", "latest")


class IcebergSource(Source):
    """Streams the rows of a table's appended snapshots (dicts of column -> value).

    >>> import pathlib, tempfile
    >>> import pyarrow as pa
    >>> from barrierflow.connectors.iceberg import warehouse_catalog
    >>> from pyiceberg.catalog import load_catalog
    >>> props = warehouse_catalog(pathlib.Path(tempfile.mkdtemp()))
    >>> catalog = load_catalog("default", **props); catalog.create_namespace("db")
    >>> table = catalog.create_table("db.t", pa.schema([("n", pa.int64())]))
    >>> table.append(pa.table({"n": [1, 2]}))
    >>> source = IcebergSource.for_table("db.t", props).end_at_latest()
    >>> reader = source.create_reader(source.create_splits())
    >>> reader.restore({})
    >>> reader.poll_split_batch(100).records.to_pylist()
    [{'n': 1}, {'n': 2}]
    """

    bounded = False

    def __init__(
        self,
        table: str,
        catalog_properties: Mapping[str, str],
        *,
        catalog_name: str = "default",
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not isinstance(table, str) or "." not in table.strip("."):
            raise ConfigurationError(
                f"IcebergSource needs a table as 'namespace.name', got {table!r}"
            )
        self.table = table
        self.catalog_properties = {str(k): str(v) for k, v in catalog_properties.items()}
        self.catalog_name = catalog_name
        self.clock = clock
        self.start: tuple[str, int | None] = ("earliest", None)
        """("earliest" | "latest" | "snapshot" | "timestamp", value)."""
        self.end: tuple[str, int | None] | None = None
        """None: unbounded; ("snapshot", id) or ("latest", None): bounded."""
        self.interval_s = DEFAULT_MONITOR_INTERVAL_S
        self.skip_overwrites = False
        self.skip_deletes = False

    @classmethod
    def for_table(
        cls, table: str, catalog_properties: Mapping[str, str], catalog_name: str = "default"
    ) -> IcebergSource:
        """A source of `table` ("namespace.name") in the catalog `catalog_properties`
        describe (what `pyiceberg.catalog.load_catalog` takes), from its earliest snapshot."""
        return cls(table, catalog_properties, catalog_name=catalog_name)

    def starting_strategy(self, strategy: str) -> IcebergSource:
        """ "earliest" (every appended snapshot the table keeps) or "latest" (only those
        appended after the job's first start)."""
        if strategy not in _STARTS:
            raise ConfigurationError(f"IcebergSource: starting strategy must be one of {_STARTS}")
        return self._with(start=(strategy, None))

    def start_snapshot_id(self, snapshot_id: int) -> IcebergSource:
        """Start with the snapshot `snapshot_id` (included)."""
        return self._with(start=("snapshot", int(snapshot_id)))

    def start_snapshot_timestamp(self, timestamp_ms: int) -> IcebergSource:
        """Start with the first snapshot committed at or after `timestamp_ms` (epoch ms)."""
        return self._with(start=("timestamp", int(timestamp_ms)))

    def end_snapshot_id(self, snapshot_id: int) -> IcebergSource:
        """Bounded: end after the snapshot `snapshot_id` (included)."""
        return self._with(end=("snapshot", int(snapshot_id)), bounded=True)

    def end_at_latest(self) -> IcebergSource:
        """Bounded: end after the table's current snapshot when the job first starts."""
        return self._with(end=("latest", None), bounded=True)

    def monitor_interval(self, seconds: float) -> IcebergSource:
        """How often to look for new snapshots once everything was read."""
        if not seconds > 0:
            raise ConfigurationError("IcebergSource: the monitor interval must be above 0")
        return self._with(interval_s=float(seconds))

    def streaming_skip_overwrite_snapshots(self, skip: bool = True) -> IcebergSource:
        """Pass over `overwrite` snapshots (rows rewritten or deleted within files, an
        upsert's updates) instead of failing on them; what they add is not read either."""
        return self._with(skip_overwrites=_flag("streaming_skip_overwrite_snapshots", skip))

    def streaming_skip_delete_snapshots(self, skip: bool = True) -> IcebergSource:
        """Pass over `delete` snapshots (whole data files removed) instead of failing."""
        return self._with(skip_deletes=_flag("streaming_skip_delete_snapshots", skip))

    def _with(self, **changes: Any) -> IcebergSource:
        configured = copy.copy(self)
        for name, value in changes.items():
            setattr(configured, name, value)
        return configured

    # ---- driver -------------------------------------------------------------------------------

    def create_splits(self) -> list[SourceSplit]:
        """One split; its payload fixes the start and end as snapshot ids now, so every
        attempt and restart reads the same range."""
        table = load_table(self._catalog(), self.table, SourceError)
        ancestry = _ancestry(table, None)  # oldest first
        kind, value = self.start
        after: int | None = None
        if kind == "latest":
            after = ancestry[-1].snapshot_id if ancestry else None
        elif kind == "snapshot":
            ids = [s.snapshot_id for s in ancestry]
            if value not in ids:
                raise SourceError(
                    f"IcebergSource: snapshot {value} is not in the history of {self.table!r}"
                )
            index = ids.index(value)
            after = ids[index - 1] if index else None
        elif kind == "timestamp":
            older = [s for s in ancestry if s.timestamp_ms < value]
            after = older[-1].snapshot_id if older else None
        end: int | None = None
        if self.end is not None:
            end_kind, end_value = self.end
            if end_kind == "latest":
                end = ancestry[-1].snapshot_id if ancestry else None
            else:
                if end_value not in {s.snapshot_id for s in ancestry}:
                    raise SourceError(
                        f"IcebergSource: end snapshot {end_value} is not in the history of "
                        f"{self.table!r}"
                    )
                end = end_value
        return [SourceSplit(self.table, {"after": after, "end": end})]

    def create_reader(
        self, splits: Sequence[SourceSplit], *, clock: Clock | None = None
    ) -> SourceReader:
        return _SnapshotReader(self, list(splits), clock or self.clock)

    def _catalog(self) -> Any:
        return connect(self.catalog_properties, self.catalog_name, SourceError)


class _SnapshotReader(SourceReader):
    """Reads appended snapshots one data file at a time, on the mailbox thread (a local or
    object-store read of one file; the catalog is asked once per monitor interval)."""

    def __init__(self, source: IcebergSource, splits: list[SourceSplit], clock: Clock) -> None:
        self._source, self._clock = source, clock
        self._split = splits[0] if splits else None
        self._table: Any = None
        self._position: dict[str, Any] = {"done": None, "snapshot": None, "file": 0, "row": 0}
        self._queue: list[Any] = []
        """Snapshots to read after `done`, oldest first (the first may be in progress)."""
        self._files: list[Any] | None = None
        self._data: Any = None
        self._next_check = 0.0
        self._ended = False

    def split_ids(self) -> list[str]:
        return [self._split.split_id] if self._split else []

    def restore(self, positions: dict[str, Any]) -> None:
        if self._split is None:
            return
        saved = positions.get(self._split.split_id)
        if saved is not None:
            self._position = dict(saved)
        else:
            self._position["done"] = self._split.payload["after"]

    def snapshot(self) -> dict[str, Any]:
        return {} if self._split is None else {self._split.split_id: dict(self._position)}

    def poll_batch(self, max_records: int) -> list[Any] | None:
        batch = self.poll_split_batch(max_records)
        return None if batch is None else list(batch.records or [])

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        split = self._split
        if split is None or self._ended:
            return (
                None if self._source.bounded or self._ended else SplitBatch(WHOLE_READER_SPLIT, [])
            )
        end = split.payload["end"]
        position = self._position
        if self._source.bounded and (end is None or position["done"] == end):
            self._ended = True
            return SplitBatch(split.split_id, [], finished=True)
        if not self._queue and not self._discover(end):
            return SplitBatch(split.split_id, [])
        snapshot = self._queue[0]
        if position["snapshot"] != snapshot.snapshot_id:
            position.update(snapshot=snapshot.snapshot_id, file=0, row=0)
            self._files, self._data = None, None
        if self._files is None:
            self._files = self._files_to_read(snapshot)
        if position["file"] >= len(self._files):
            self._queue.pop(0)
            position.update(done=snapshot.snapshot_id, snapshot=None, file=0, row=0)
            self._files = None
            return SplitBatch(split.split_id, [])
        if self._data is None:
            self._data = _read_file(self._table, self._files[position["file"]], self._source)
        rows = self._data.slice(position["row"], max_records)
        position["row"] += rows.num_rows
        if position["row"] >= self._data.num_rows:
            position.update(file=position["file"] + 1, row=0)
            self._data = None
        if not rows.num_rows:
            return SplitBatch(split.split_id, [])
        batch = rows.combine_chunks().to_batches()[0]
        return SplitBatch(split.split_id, batch, timestamps=[snapshot.timestamp_ms] * len(batch))

    def _files_to_read(self, snapshot: Any) -> list[Any]:
        """What `snapshot` appended: an append's added files, nothing of a replace or of a
        skipped overwrite or delete; another operation fails, naming the snapshot."""
        operation = _operation(snapshot)
        if operation == "append":
            return _added_files(self._table, snapshot)
        if operation == "replace":
            return []
        source = self._source
        skip = {"overwrite": source.skip_overwrites, "delete": source.skip_deletes}
        if skip.get(operation):
            return []
        how = {
            "overwrite": "rewrites or deletes rows, which appended rows cannot retract; "
            "set .streaming_skip_overwrite_snapshots() to pass such snapshots over",
            "delete": "deletes data files, which appended rows cannot retract; "
            "set .streaming_skip_delete_snapshots() to pass such snapshots over",
        }
        raise SourceError(
            f"IcebergSource {source.table!r}: snapshot {snapshot.snapshot_id} is "
            f"{'an' if operation[:1] in 'aeiou' else 'a'} {operation!r} snapshot: it "
            + how.get(operation, "is no operation this source can follow")
        )

    def _discover(self, end: int | None) -> bool:
        """Queue the snapshots after `done` (up to `end` when bounded); False if none yet.
        Asks the catalog at most once per monitor interval (bounded: at once)."""
        now = self._clock.monotonic()
        if not self._source.bounded and now < self._next_check:
            return False
        self._next_check = now + self._source.interval_s
        if self._table is None:
            self._table = load_table(self._source._catalog(), self._source.table, SourceError)
        else:
            self._table = self._table.refresh()
        done = self._position["done"]
        ancestry = _ancestry(self._table, end)
        ids = [s.snapshot_id for s in ancestry]
        if done is not None and done not in ids:
            raise SourceError(
                f"IcebergSource {self._source.table!r}: snapshot {done}, the last one read, "
                "is no longer in the table's history (expired, or the table was rolled back)"
            )
        start = ids.index(done) + 1 if done is not None else 0
        self._queue = ancestry[start:]
        return bool(self._queue)

    def close(self) -> None:
        self._table = self._data = None


def _ancestry(table: Any, end: int | None) -> list[Any]:
    """The main branch's snapshots up to `end` (None: the current one), oldest first."""
    from pyiceberg.table.snapshots import ancestors_of

    top = table.current_snapshot() if end is None else table.snapshot_by_id(end)
    return list(ancestors_of(top, table.metadata))[::-1]


def _operation(snapshot: Any) -> str:
    """The snapshot's operation as Iceberg names it ("append", "overwrite", ...)."""
    if snapshot.summary is None:
        return "unknown"
    return str(snapshot.summary.operation.value)


def _flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigurationError(f"IcebergSource: {name} takes True or False, not {value!r}")
    return value


def _added_files(table: Any, snapshot: Any) -> list[Any]:
    """The data files `snapshot` added, sorted by path (the order positions count in)."""
    from pyiceberg.manifest import ManifestContent, ManifestEntryStatus

    files = []
    for manifest in snapshot.manifests(table.io):
        if manifest.content != ManifestContent.DATA:
            continue
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.status == ManifestEntryStatus.ADDED:
                files.append(entry.data_file)
    return sorted(files, key=lambda f: f.file_path)


def _read_file(table: Any, data_file: Any, source: IcebergSource) -> Any:
    pyiceberg(SourceError)
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan
    from pyiceberg.table import FileScanTask

    try:
        scan = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue())
        return scan.to_table([FileScanTask(data_file)])
    except Exception as problem:
        raise SourceError(
            f"IcebergSource {source.table!r}: cannot read {data_file.file_path}: {problem}"
        ) from None
