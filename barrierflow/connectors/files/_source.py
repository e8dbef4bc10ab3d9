"""FileSource: the lines of a file or a folder of files, replayable by byte offset.

A bounded `FileSource` reads the files present when the job starts, each file one split.
`FileSource.monitor_continuously(interval)` turns it into an unbounded source that keeps
listing its folder and reads every file that appears (see `ContinuousFileReader`).
"""

from __future__ import annotations

import copy
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import (
    WHOLE_READER_SPLIT,
    BadRecord,
    Source,
    SourceReader,
    SourceSplit,
    SplitBatch,
)
from barrierflow.connectors.files._formats import JsonLineFormat, LineFormat, TextLineFormat
from barrierflow.connectors.files._lines import DEFAULT_CHUNK_SIZE, LineFileReader
from barrierflow.core.time import Duration
from barrierflow.errors import ConfigurationError, SourceError

MONITOR_BUCKETS = 128
"""How many ownership buckets a monitored folder is cut into: each new file belongs to the
bucket `crc32(relative path) mod MONITOR_BUCKETS`, and the buckets are the source's splits,
dealt to the subtasks. So at most this many subtasks read a monitored folder."""

_BUCKET_PREFIX = "files-bucket-"


class FileSource(Source):
    """Reads every line of a file, or of every file in a folder, exactly once.

    Exactly-once because the position of each file is the byte offset of its next unread
    line, stored in every checkpoint: a restore seeks there. Assumes the files do not change
    while the job runs or between a checkpoint and its restore. Bounded, unless monitored.

    `path` is a local path or a URI (`file://`, `s3://`, `hdfs://`). A folder is read
    recursively: all regular files, in sorted order, skipping names that start with `.` or `_`
    (as Spark does). Each file is one split, named by its path relative to the folder.
    `monitor_continuously` makes it keep watching the folder for new files (unbounded).
    A line that does not decode fails the job, naming the file, line and byte offset, or
    with `with_dead_letters()` leaves on the `DEAD_LETTERS` side output.

    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.txt").write_text("first\\nsecond\\n")
    >>> _ = (folder / "b.txt").write_text("third")
    >>> source = FileSource.for_lines(str(folder))
    >>> [split.split_id for split in source.create_splits()]
    ['a.txt', 'b.txt']
    >>> reader = source.create_reader(source.create_splits())
    >>> reader.restore({})
    >>> reader.poll_batch(10), reader.poll_batch(10), reader.poll_batch(10)
    (['first', 'second'], ['third'], None)
    >>> reader.snapshot()
    {'a.txt': 13, 'b.txt': 5}
    """

    bounded = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        line_format: LineFormat,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self.root = _fs.location(path)
        self.line_format = line_format
        self.chunk_size = chunk_size
        self.monitor_interval_ms: int | None = None
        """How often a monitored folder is listed; None when the source is bounded."""

    @classmethod
    def for_lines(
        cls, path: str | os.PathLike[str], *, chunk_size: int = DEFAULT_CHUNK_SIZE
    ) -> FileSource:
        """Each line is a `str` record (UTF-8; the newline and a trailing `\\r` removed)."""
        return cls(path, TextLineFormat(), chunk_size=chunk_size)

    @classmethod
    def for_json_lines(
        cls, path: str | os.PathLike[str], *, chunk_size: int = DEFAULT_CHUNK_SIZE
    ) -> FileSource:
        """Each line is one JSON value, which is the record; blank lines are skipped.

        >>> import pathlib, tempfile
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "events.jsonl"
        >>> _ = file.write_text('{"user": "ann", "clicks": 3}\\n[1, 2]\\n')
        >>> source = FileSource.for_json_lines(str(file))
        >>> reader = source.create_reader(source.create_splits())
        >>> reader.poll_batch(10)
        [{'user': 'ann', 'clicks': 3}, [1, 2]]
        """
        return cls(path, JsonLineFormat(), chunk_size=chunk_size)

    def monitor_continuously(self, interval: Duration | int = 1_000) -> FileSource:
        """This source, unbounded: it lists the folder every `interval` (ms or a `Duration`)
        and reads each file that appears, once (Flink's `monitorContinuously`).

        Exactly-once: the checkpoint holds the files already read and the byte offset within
        each file being read, so after a restore a file is neither read again nor skipped.
        Assumes a file is complete when it appears: write it elsewhere (or under a hidden
        name, starting with `.` or `_`) and rename or move it in. A file is never read
        twice, even if it is replaced later under the same name. Each file is one split
        for event time, with its own watermark.

        Unlike Flink, there is no enumerator on the driver handing out files: every
        subtask lists the folder itself and reads the files it owns, picked by a stable
        hash of the file's relative path (see `MONITOR_BUCKETS` and `ContinuousFileReader`).

        >>> import pathlib, tempfile
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> source = FileSource.for_lines(str(folder)).monitor_continuously(500)
        >>> source.bounded, source.monitor_interval_ms
        (False, 500)
        """
        millis = interval.to_milliseconds() if isinstance(interval, Duration) else interval
        if isinstance(millis, bool) or not isinstance(millis, int) or millis <= 0:
            raise ConfigurationError(
                f"monitor_continuously needs an interval > 0 (ms or a Duration), got {interval!r}"
            )
        monitored = copy.copy(self)
        monitored.monitor_interval_ms = millis
        monitored.bounded = False
        return monitored

    def with_dead_letters(self, enabled: bool = True) -> FileSource:
        """This source, sending lines that do not decode (not UTF-8, not JSON) to the
        `DEAD_LETTERS` side output instead of failing the job.

        Each leaves as a `DeadLetter` whose split is the file (its path relative to the
        folder), whose offset is the line's byte offset, with the line's bytes and an
        error naming the line number, the file and what is wrong. Reading goes on after
        it, and the line counts as read (a restore does not read it again). Without this
        (the default) the first such line fails the job, naming the same.

        >>> source = FileSource.for_json_lines("events.jsonl").with_dead_letters()
        >>> source.dead_letters
        True
        """
        configured = copy.copy(self)
        configured.dead_letters = enabled
        return configured

    def storage_locations(self) -> list[str]:
        return [self.root.uri]

    def create_splits(self) -> list[SourceSplit]:
        if self.monitor_interval_ms is not None:
            return self._create_buckets()
        try:
            if _fs.is_file(self.root):
                name = self.root.path.rstrip("/").rsplit("/", 1)[-1]
                return [SourceSplit(name, self.root.uri)]
            if not _fs.is_dir(self.root):
                raise SourceError(f"the source path {self.root} does not exist")
            return [
                SourceSplit(relative, self.root.child(relative).uri)
                for relative in _fs.list_files_recursive(self.root)
            ]
        except OSError as error:
            raise SourceError(f"the source path {self.root} cannot be read: {error}") from error

    def create_reader(
        self, splits: Sequence[SourceSplit], *, clock: Clock = SYSTEM_CLOCK
    ) -> SourceReader:
        """The reader of one subtask; `clock` times the listings of a monitored folder."""
        if self.monitor_interval_ms is None:
            return FileSourceReader(splits, self.line_format, self.chunk_size)
        return ContinuousFileReader(
            self.root,
            splits,
            self.line_format,
            self.monitor_interval_ms,
            chunk_size=self.chunk_size,
            clock=clock,
        )

    def _create_buckets(self) -> list[SourceSplit]:
        """The splits of a monitored folder: its ownership buckets (the folder must exist)."""
        try:
            is_dir = _fs.is_dir(self.root)
        except OSError as error:
            raise SourceError(f"the source path {self.root} cannot be read: {error}") from error
        if not is_dir:
            raise SourceError(
                f"the monitored folder {self.root} does not exist or is not a folder "
                "(monitor_continuously watches a folder, not a file)"
            )
        return [
            SourceSplit(f"{_BUCKET_PREFIX}{k}-of-{MONITOR_BUCKETS}", k)
            for k in range(MONITOR_BUCKETS)
        ]


class FileSourceReader(SourceReader):
    """Reads its files one after another. Mailbox thread only.

    Exactly-once: its snapshot is the byte offset of the next unread line of every file,
    finished files included (their offset is their size), so a restore neither re-reads nor
    skips a line.
    """

    def __init__(
        self,
        splits: Sequence[SourceSplit],
        line_format: LineFormat,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ) -> None:
        self._splits = list(splits)
        self._format = line_format
        self._chunk_size = chunk_size
        self._positions: dict[str, int] = {split.split_id: 0 for split in self._splits}
        self._current = 0
        """Index in `_splits` of the file being read; `len(_splits)` once all are read."""
        self._lines: LineFileReader | None = None

    def restore(self, positions: dict[str, Any]) -> None:
        for split in self._splits:
            if split.split_id in positions:
                self._positions[split.split_id] = int(positions[split.split_id])

    def poll_batch(self, max_records: int) -> list[Any] | None:
        """The next records; a bad line raises `SourceError` naming file, line and offset
        (the `SourceOperator` uses `poll_split_batch`, which reports bad lines instead)."""
        while (batch := self.poll_split_batch(max_records)) is not None:
            _raise_first_bad(batch)
            if batch.records:
                return batch.records
        return None

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def split_ids(self) -> list[str]:
        return [split.split_id for split in self._splits]

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        """The next lines of the file being read (and its bad lines), or that file's end
        (`finished`)."""
        while self._current < len(self._splits):
            split = self._splits[self._current]
            if self._lines is None:
                self._lines = LineFileReader(
                    _fs.Location(split.payload), self._positions[split.split_id], self._chunk_size
                )
            try:
                start, raw = self._lines.read_lines(max_records)
            except OSError as error:
                raise SourceError(f"cannot read {split.payload}: {error}") from error
            if not raw:
                self._lines.close()
                self._lines = None
                self._current += 1
                return SplitBatch(split.split_id, [], finished=True)
            records, bad = _parse_lines(self._format, self._lines, split.split_id, start, raw)
            self._positions[split.split_id] = self._lines.position
            if records or bad:
                return SplitBatch(split.split_id, records, bad=bad)
        return None

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
            self._lines = None


class ContinuousFileReader(SourceReader):
    """Reads the files of a monitored folder that this subtask owns, as they appear.
    Mailbox thread only.

    Exactly-once: its snapshot holds, per bucket it owns, the files already read and the
    byte offset of the next unread line in each file it has started, so a restore neither
    re-reads nor skips a line and never reads a finished file again. Assumes files are
    complete when they appear and do not change afterwards.

    Ownership needs no messages: a file belongs to bucket `crc32(relative path) mod
    MONITOR_BUCKETS`, and this reader reads the files of the buckets (splits) it was given.
    On restore it takes, from the union of all old subtasks' snapshots, the files of its own
    buckets, so after a rescale every file has exactly one owner again. Every reader lists
    the whole folder once per interval (on the mailbox thread, between batches) and reads
    its new files in name order, one after another; files are not balanced by size.

    Each file is a split for event time: the file's records are reported under its relative
    path, and its end (`finished`) only once the next file has produced records or no file
    is left, so a reader moving from one file to the next never looks idle in between.
    """

    def __init__(
        self,
        root: _fs.Location,
        splits: Sequence[SourceSplit],
        line_format: LineFormat,
        interval_ms: int,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._root = root
        self._buckets: dict[int, str] = {int(split.payload): split.split_id for split in splits}
        """Bucket number -> its split id, for the buckets this reader owns."""
        self._format = line_format
        self._interval_s = interval_ms / 1000
        self._chunk_size = chunk_size
        self._clock = clock
        self._next_listing: float | None = None
        """When (clock's monotonic seconds) to list the folder next; None: at the next poll."""
        self._finished: set[str] = set()
        """Relative paths of the owned files read to their end: never read again."""
        self._offsets: dict[str, int] = {}
        """Byte offset of the next unread line of each owned file started but not finished."""
        self._pending: list[str] = []
        """Owned files to read, in order; the first is the one being read."""
        self._lines: LineFileReader | None = None
        """The open reader of `_pending[0]`, if started."""
        self._unreported: list[str] = []
        """Finished files whose end is not yet reported (waiting for the next file's records)."""
        self._reportable: list[str] = []
        """Finished files whose end is reported at the next polls."""

    def owns(self, relative: str) -> bool:
        """Whether `relative` (a path relative to the folder) is this reader's to read."""
        return _bucket_of(relative) in self._buckets

    def restore(self, positions: dict[str, Any]) -> None:
        for key, state in positions.items():
            if not key.startswith(_BUCKET_PREFIX) or not isinstance(state, dict):
                continue  # another source's positions: not ours
            self._finished.update(name for name in state.get("finished", ()) if self.owns(name))
            for name, offset in state.get("offsets", {}).items():
                if self.owns(name):
                    self._offsets[name] = int(offset)
        # Files in progress are read first, before anything the first listing finds.
        self._pending = sorted(self._offsets)

    def split_ids(self) -> list[str]:
        """The files known at start (those in progress); new files are reported as they come."""
        return list(self._pending)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        batch = self.poll_split_batch(max_records)
        _raise_first_bad(batch)
        return batch.records

    def poll_split_batch(self, max_records: int) -> SplitBatch:
        """The next lines of the file being read, the end of an earlier file, or nothing now
        (an empty batch of the pseudo-split `WHOLE_READER_SPLIT`); never the end of input."""
        self._list_if_due()
        if self._reportable:
            return SplitBatch(self._reportable.pop(0), [], finished=True)
        while self._pending:
            name = self._pending[0]
            read = self._read(name, max_records)
            if read is None:
                self._pending.pop(0)
                self._offsets.pop(name, None)
                self._finished.add(name)
                self._unreported.append(name)
            elif read[0] or read[1]:
                # Files ended before this one can now report their end.
                self._reportable.extend(self._unreported)
                self._unreported.clear()
                return SplitBatch(name, read[0], bad=read[1])
        if self._unreported:
            self._reportable, self._unreported = self._unreported, []
            return SplitBatch(self._reportable.pop(0), [], finished=True)
        return SplitBatch(WHOLE_READER_SPLIT, [])

    def snapshot(self) -> dict[str, Any]:
        """Per owned bucket: its finished files (sorted) and the offsets of its files in
        progress. Grows with the number of files read (one name per finished file)."""
        finished: dict[int, list[str]] = {bucket: [] for bucket in self._buckets}
        offsets: dict[int, dict[str, int]] = {bucket: {} for bucket in self._buckets}
        for name in self._finished:
            finished[_bucket_of(name)].append(name)
        for name, offset in self._offsets.items():
            offsets[_bucket_of(name)][name] = offset
        return {
            split_id: {"finished": sorted(finished[bucket]), "offsets": offsets[bucket]}
            for bucket, split_id in self._buckets.items()
        }

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
            self._lines = None

    # ---- internals -----------------------------------------------------------------------------

    def _list_if_due(self) -> None:
        """List the folder if the interval has passed, queueing the new files this reader owns."""
        now = self._clock.monotonic()
        if self._next_listing is not None and now < self._next_listing:
            return
        self._next_listing = now + self._interval_s
        if not self._buckets:
            return  # more subtasks than buckets: this one owns nothing
        try:
            if not _fs.is_dir(self._root):
                raise SourceError(
                    f"the monitored folder {self._root} no longer exists (or is not a folder)"
                )
            names = _fs.list_files_recursive(self._root)
        except OSError as error:
            raise SourceError(f"cannot list the monitored folder {self._root}: {error}") from error
        queued = set(self._pending)
        self._pending.extend(
            name
            for name in names
            if name not in self._finished and name not in queued and self.owns(name)
        )

    def _read(self, name: str, max_records: int) -> tuple[list[Any], Sequence[BadLine]] | None:
        """Up to `max_records` lines of file `name` as records and bad lines (maybe none of
        either); None at its end."""
        file = self._root.child(name)
        if self._lines is None:
            self._lines = LineFileReader(file, self._offsets.get(name, 0), self._chunk_size)
        try:
            start, raw = self._lines.read_lines(max_records)
        except OSError as error:
            raise SourceError(f"cannot read {file}: {error}") from error
        if not raw:
            self._lines.close()
            self._lines = None
            return None
        read = _parse_lines(self._format, self._lines, name, start, raw)
        self._offsets[name] = self._lines.position
        return read


def _bucket_of(relative: str) -> int:
    """The ownership bucket of a file of a monitored folder: the same in every process."""
    return zlib.crc32(relative.encode("utf-8")) % MONITOR_BUCKETS


@dataclass(frozen=True)
class BadLine(BadRecord):
    """A line of a file that does not decode: a `BadRecord` whose offset is the line's byte
    offset, which also knows the file and the line number (for messages)."""

    file: str = ""
    """The file's URI."""
    line: int = 0
    """1-based."""
    reason: str = ""
    """e.g. `is not valid JSON: Expecting value at column 1`."""

    def message(self) -> str:
        """How a reader used on its own (`poll_batch`) names the line in its `SourceError`."""
        return f"{self.file}: line {self.line} (byte offset {self.offset}) {self.reason}"


def _parse_lines(
    line_format: LineFormat, lines: LineFileReader, split_id: str, start: int, raw: list[bytes]
) -> tuple[list[Any], Sequence[BadLine]]:
    """The records of `raw`, lines of split `split_id` that `lines` just read (the first at
    byte `start`), and a `BadLine` for each line that is not UTF-8 or not in the format."""
    try:
        text = b"\n".join(raw).decode("utf-8")
    except UnicodeDecodeError:
        return _parse_line_by_line(line_format, lines, split_id, start, raw)
    decoded = text.split("\n")
    if "\r" in text:
        decoded = [line[:-1] if line.endswith("\r") else line for line in decoded]
    records, bad = line_format.parse_all(decoded)
    if not bad:
        return records, ()
    return records, _bad_lines(lines, split_id, start, raw, bad)


def _parse_line_by_line(
    line_format: LineFormat, lines: LineFileReader, split_id: str, start: int, raw: list[bytes]
) -> tuple[list[Any], Sequence[BadLine]]:
    """`_parse_lines` for a batch holding bytes that are not UTF-8: each line on its own."""
    kept: list[int] = []
    decoded: list[str] = []
    bad: list[tuple[int, str]] = []
    for index, line in enumerate(raw):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            bad.append((index, "is not valid UTF-8"))
            continue
        kept.append(index)
        decoded.append(text[:-1] if text.endswith("\r") else text)
    records, unparsed = line_format.parse_all(decoded)
    bad.extend((kept[index], reason) for index, reason in unparsed)
    return records, _bad_lines(lines, split_id, start, raw, sorted(bad))


def _bad_lines(
    lines: LineFileReader,
    split_id: str,
    start: int,
    raw: list[bytes],
    bad: list[tuple[int, str]],
) -> list[BadLine]:
    first_line = lines.first_line_number()
    offsets = [start]
    for line in raw:
        offsets.append(offsets[-1] + len(line) + 1)
    file = lines.file.uri
    return [
        BadLine(
            split_id,
            offsets[index],
            raw[index],
            f"line {first_line + index} of {file} {reason}",
            "byte offset",
            file=file,
            line=first_line + index,
            reason=reason,
        )
        for index, reason in bad
    ]


def _raise_first_bad(batch: SplitBatch) -> None:
    if batch.bad:
        bad = batch.bad[0]
        raise SourceError(bad.message() if isinstance(bad, BadLine) else bad.error)
