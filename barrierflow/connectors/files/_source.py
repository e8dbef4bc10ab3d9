"""FileSource: the lines of a file or a folder of files, replayable by byte offset."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from barrierflow import _fs
from barrierflow.connectors.base import Source, SourceReader, SourceSplit, SplitBatch
from barrierflow.connectors.files._formats import (
    JsonLineFormat,
    LineFormat,
    MalformedLine,
    TextLineFormat,
)
from barrierflow.connectors.files._lines import DEFAULT_CHUNK_SIZE, LineFileReader, line_number_at
from barrierflow.errors import SourceError


class FileSource(Source):
    """Reads every line of a file, or of every file in a folder, exactly once.

    Exactly-once because the position of each file is the byte offset of its next unread
    line, stored in every checkpoint: a restore seeks there. Assumes the files do not change
    while the job runs or between a checkpoint and its restore. Bounded.

    `path` is a local path or a URI (`file://`, `s3://`, `hdfs://`). A folder is read
    recursively: all regular files, in sorted order, skipping names that start with `.` or `_`
    (as Spark does). Each file is one split, named by its path relative to the folder.

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

    def storage_locations(self) -> list[str]:
        return [self.root.uri]

    def create_splits(self) -> list[SourceSplit]:
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

    def create_reader(self, splits: Sequence[SourceSplit]) -> FileSourceReader:
        return FileSourceReader(splits, self.line_format, self.chunk_size)


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
                continue
            records = self._parse(split, start, raw)
            self._positions[split.split_id] = self._lines.position
            if records:
                return records
        return None

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def split_ids(self) -> list[str]:
        return [split.split_id for split in self._splits]

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        """The next lines of the file being read, or that file's end (`finished`)."""
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
            records = self._parse(split, start, raw)
            self._positions[split.split_id] = self._lines.position
            if records:
                return SplitBatch(split.split_id, records)
        return None

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
            self._lines = None

    # ---- internals -----------------------------------------------------------------------------

    def _parse(self, split: SourceSplit, start: int, raw: list[bytes]) -> list[Any]:
        try:
            text = b"\n".join(raw).decode("utf-8")
        except UnicodeDecodeError as error:
            index = _line_index_at(raw, error.start)
            raise self._malformed(split, start, raw, index, "is not valid UTF-8") from None
        lines = text.split("\n")
        if "\r" in text:
            lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        try:
            return self._format.parse(lines)
        except MalformedLine as bad:
            raise self._malformed(split, start, raw, bad.index, bad.reason) from None

    def _malformed(
        self, split: SourceSplit, start: int, raw: list[bytes], index: int, reason: str
    ) -> SourceError:
        offset = start + sum(len(line) + 1 for line in raw[:index])
        file = _fs.Location(split.payload)
        line = line_number_at(file, offset)
        return SourceError(f"{file}: line {line} (byte offset {offset}) {reason}")


def _line_index_at(raw: list[bytes], byte: int) -> int:
    """Which of the `\\n`-joined `raw` lines holds byte `byte` of the joined bytes."""
    end = 0
    for index, line in enumerate(raw):
        end += len(line) + 1
        if byte < end:
            return index
    return len(raw) - 1
