"""Nexmark events as replayable sources: made by the generator, or read from an events file.

`NexmarkSource` deals the event numbers to a fixed number of splits (split `k` makes
`k, k + num_splits, ...`), like `DataGeneratorSource`: a split's position is its next event
number, so a restore makes exactly the events that were not emitted yet, on any machine.

`NexmarkFileSource` reads a file `write_events` wrote, in parallel: a JSON Lines file is cut
into byte ranges at line starts, a Parquet file into its row groups; positions are byte
offsets (JSON Lines) or row numbers within the row group (Parquet). pyarrow parses (C++).

Both hand out events as Arrow record batches in flink-nexmark's table shape, each event's
`dateTime` as its timestamp, with `events_from_record_batch` as the batch's converter: the
events stay columnar through the job (`DataStream.map_batches` reads them as Arrow) and
become `Person`, `Auction` and `Bid` objects, column by column, only where Python code
reads them. `poll_batch` gives those objects.

>>> from barrierflow.nexmark.generator import GeneratorConfig, event_at
>>> config = GeneratorConfig()
>>> source = NexmarkSource(config, 100, num_splits=4)
>>> reader = source.create_reader(source.create_splits())
>>> reader.restore({"1-of-4": 41})  # split 1 resumes at event 41
>>> batch = reader.poll_split_batch(3)
>>> batch.split_id, batch.converter(batch.records) == [event_at(config, n) for n in (0, 4, 8)]
('0-of-4', True)
>>> list(batch.timestamps) == [event_at(config, n).date_time for n in (0, 4, 8)]
True
>>> reader.snapshot()
{'0-of-4': 12, '1-of-4': 41, '2-of-4': 2, '3-of-4': 3}
"""

from __future__ import annotations

import copy
import io
import itertools
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import BadRecord, Source, SourceReader, SourceSplit, SplitBatch
from barrierflow.connectors.files import BadLine, line_number_at
from barrierflow.connectors.pacing import Pace
from barrierflow.errors import ConfigurationError, SourceError
from barrierflow.nexmark.events_file import (
    EVENTS_SCHEMA,
    event_times,
    events_from_record_batch,
    is_parquet,
    record_batch_of,
)
from barrierflow.nexmark.generator import GeneratorConfig, generate_numbers
from barrierflow.nexmark.model import AUCTION, BID, PERSON, TABLE_NAMES, Auction, Bid, Person

__all__ = ["NexmarkFileSource", "NexmarkSource"]

# ---- generated events ------------------------------------------------------------------------


class NexmarkSource(Source):
    """Emits generator events `0 .. count - 1` exactly once (forever if `count` is None).

    Exactly-once because each split's position (its next event number) is in every
    checkpoint and event `n` depends only on `(config, n)`. With `events_per_second`, event
    `n` goes out no earlier than `n / events_per_second` s after the start; when
    `events_per_second` equals `config.first_event_rate`, that is its event time after the
    base time, so event time keeps pace with the wall clock. A `config.base_time` of None
    is fixed here, on the driver, to the wall clock now: every subtask and every restart
    then agrees on the events, and a paced source measures its start from that instant
    (after a restart it catches up at once). `start_at_ms` anchors the pace at another
    wall-clock instant, e.g. a little after the job will have started, so no event is due
    before the tasks run (then set `base_time` to the same instant and `first_event_rate`
    to `events_per_second`: event time is the wall clock at which each event is made).
    Otherwise a paced reader starts its clock at its first poll. Under `barrierflow chaos`
    full-speed runs the pace is dropped (`Source.pace`).

    >>> source = NexmarkSource(GeneratorConfig(base_time=None), 10)
    >>> source.config.base_time is not None, source.bounded
    (True, True)
    """

    def __init__(
        self,
        config: GeneratorConfig,
        count: int | None,
        *,
        num_splits: int = 8,
        events_per_second: float | None = None,
        start_at_ms: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not isinstance(config, GeneratorConfig):
            raise ConfigurationError(
                f"NexmarkSource needs a GeneratorConfig, got {type(config).__name__}"
            )
        if count is not None and (not _is_int(count) or count < 0):
            raise ConfigurationError(f"count must be None or an int >= 0, got {count!r}")
        if not _is_int(num_splits) or num_splits < 1:
            raise ConfigurationError(f"num_splits must be an int >= 1, got {num_splits!r}")
        if events_per_second is not None and not (
            isinstance(events_per_second, int | float)
            and not isinstance(events_per_second, bool)
            and 0 < events_per_second < math.inf
        ):
            raise ConfigurationError(
                f"events_per_second must be None or a positive number, got {events_per_second!r}"
            )
        if start_at_ms is not None and (not _is_int(start_at_ms) or start_at_ms < 0):
            raise ConfigurationError(f"start_at_ms must be None or epoch ms, got {start_at_ms!r}")
        self.wall_start_ms: int | None = start_at_ms
        """The wall clock (epoch ms) at which event 0 is due: `start_at_ms`, or the instant
        that fixed a None `base_time`; None: each paced reader's first poll."""
        if config.base_time is None:
            if self.wall_start_ms is None:
                self.wall_start_ms = clock.epoch_millis()
            config = config.with_base_time(self.wall_start_ms)
        self.config = config
        self.count = count
        self.num_splits = num_splits
        self.events_per_second = Source.pace(events_per_second)
        """None in the failure-free run of `barrierflow chaos` (`Source.pace`)."""
        self.clock = clock
        self.bounded = count is not None

    def create_splits(self) -> list[SourceSplit]:
        # The number of splits is in the id: positions of a different split count never apply.
        n = self.num_splits
        return [SourceSplit(f"{k}-of-{n}", k) for k in range(n)]

    def create_reader(self, splits: Sequence[SourceSplit]) -> NexmarkSourceReader:
        return NexmarkSourceReader(self, splits)


class NexmarkSourceReader(SourceReader):
    """Makes the events of its splits, the split furthest behind first. Mailbox thread only.

    Exactly-once: its snapshot is the next event number of every split. A paced reader
    returns empty batches while no event of its splits is due.
    """

    def __init__(self, source: NexmarkSource, splits: Sequence[SourceSplit]) -> None:
        self._config = source.config
        self._count = source.count
        self._stride = source.num_splits
        self._rate = source.events_per_second
        self._wall_start_ms = source.wall_start_ms
        self._clock = source.clock
        self._anchor: float | None = None
        """Monotonic seconds at which event 0 was due (unpaced or wall-anchored: unused)."""
        self._positions: dict[str, int] = {split.split_id: int(split.payload) for split in splits}

    def restore(self, positions: dict[str, Any]) -> None:
        for split_id in self._positions:
            if split_id in positions:
                self._positions[split_id] = int(positions[split_id])

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def split_ids(self) -> list[str]:
        return list(self._positions)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        while (batch := self.poll_split_batch(max_records)) is not None:
            if len(batch.records) or not batch.finished:
                return _events_of(batch)
        return None

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        """The next events of the split furthest behind (maybe none yet, when paced)."""
        numbers = self.next_numbers(max_records)
        if numbers is None:
            return None
        split_id, taken, finished = numbers
        if not taken:
            return SplitBatch(split_id, [], finished=finished)
        return _arrow_split_batch(
            split_id, record_batch_of(generate_numbers(self._config, taken)), finished
        )

    def next_numbers(self, max_records: int) -> tuple[str, range, bool] | None:
        """The split furthest behind, the event numbers it may emit now (moving its position
        past them) and whether that ends it; None once every split has ended."""
        count = self._count
        active = [
            (position, split_id)
            for split_id, position in self._positions.items()
            if count is None or position < count
        ]
        if not active:
            return None
        position, split_id = min(active)
        stride = self._stride
        take = max_records
        if count is not None:
            take = min(take, -((position - count) // stride))  # ceil((count - pos) / stride)
        if self._rate is not None:
            due = self._last_due(position)
            take = min(take, max(0, (due - position) // stride + 1))
        end = position + take * stride
        self._positions[split_id] = end
        return split_id, range(position, end, stride), count is not None and end >= count

    def _last_due(self, earliest: int) -> int:
        """The largest event number due by now (-1 if none)."""
        assert self._rate is not None
        if self._wall_start_ms is not None:
            elapsed = (self._clock.epoch_millis() - self._wall_start_ms) / 1000
        else:
            now = self._clock.monotonic()
            if self._anchor is None:  # resume where this reader's input stands, at once
                self._anchor = now - earliest / self._rate
            elapsed = now - self._anchor
        # The epsilon keeps float error in clock differences from costing an event.
        return math.floor(elapsed * self._rate + 1e-6)


def _arrow_split_batch(
    split_id: str, batch: pa.RecordBatch, finished: bool, bad: Sequence[BadRecord] = ()
) -> SplitBatch:
    """Events as Arrow (flink-nexmark's table shape), each with its `dateTime` as its own
    timestamp: they stay columnar through the job until Python code reads them, as
    `Person`, `Auction` and `Bid` (`events_from_record_batch`)."""
    return SplitBatch(
        split_id,
        batch,
        timestamps=event_times(batch),
        finished=finished,
        bad=bad,
        converter=events_from_record_batch,
    )


def _events_of(batch: SplitBatch) -> list[Any]:
    """A split batch's events as Python objects (`poll_batch`'s list form)."""
    records = batch.records
    return events_from_record_batch(records) if isinstance(records, pa.RecordBatch) else records


# ---- events files ----------------------------------------------------------------------------

DEFAULT_MIN_SPLITS = 16
"""A JSON Lines file is cut into at least this many byte ranges (2x a parallelism of 8)."""
DEFAULT_MAX_SPLIT_BYTES = 64 << 20
"""...and into ranges of at most this many bytes."""
DEFAULT_CHUNK_BYTES = 4 << 20
"""How many bytes of JSON Lines a reader parses at a time."""


class NexmarkFileSource(Source):
    """Reads every event of an events file exactly once, in parallel (bounded).

    Exactly-once because each split's position (the byte offset of its next unread line,
    or its next row in the row group) is in every checkpoint; assumes the file does not
    change. `.jsonl`, `.json` and `.ndjson` files are JSON Lines, cut into at least
    `min_splits` byte ranges of at most `max_split_bytes`, each starting at a line; `.parquet`
    files are split by row group. A line or row that is not an event fails the job naming
    the file, line and byte offset (or row), like `FileSource`, or with
    `with_dead_letters()` leaves on the `DEAD_LETTERS` side output.

    >>> import pathlib, tempfile
    >>> from barrierflow.nexmark.events_file import write_events
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "events.jsonl"
    >>> _ = write_events(path, GeneratorConfig(), 500)
    >>> splits = NexmarkFileSource(path, min_splits=3).create_splits()
    >>> [split.split_id.split("@")[0] for split in splits]
    ['events.jsonl', 'events.jsonl', 'events.jsonl']
    >>> bounds = [split.payload[1:] for split in splits]  # (start, end): lines, end to end
    >>> bounds[0][0], bounds[0][1] == bounds[1][0], bounds[1][1] == bounds[2][0]
    (0, True, True)
    >>> bounds[2][1] == path.stat().st_size
    True
    """

    bounded = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        min_splits: int = DEFAULT_MIN_SPLITS,
        max_split_bytes: int = DEFAULT_MAX_SPLIT_BYTES,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    ) -> None:
        text = os.fspath(path)
        if not re.search(r"\.(jsonl|json|ndjson|parquet)$", text.lower()):
            raise ConfigurationError(
                f"NexmarkFileSource reads .jsonl, .json, .ndjson (JSON Lines) or .parquet "
                f"events files, got {text!r}"
            )
        for name, value in (
            ("min_splits", min_splits),
            ("max_split_bytes", max_split_bytes),
            ("chunk_bytes", chunk_bytes),
        ):
            if not _is_int(value) or value < 1:
                raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
        self.file = _fs.location(path)
        self.parquet = is_parquet(text)
        self.min_splits = min_splits
        self.max_split_bytes = max_split_bytes
        self.chunk_bytes = chunk_bytes
        self.rate_per_reader: float | None = None
        """Events/s each reader emits at most (`with_rate_per_reader`); None: unpaced."""

    def with_dead_letters(self, enabled: bool = True) -> NexmarkFileSource:
        """This source, sending lines (rows) that are not events to the `DEAD_LETTERS` side
        output instead of failing the job."""
        configured = copy.copy(self)
        configured.dead_letters = enabled
        return configured

    def with_rate_per_reader(self, events_per_second: float) -> NexmarkFileSource:
        """This source, each reader (source subtask) emitting at most `events_per_second`:
        to replay a file over a chosen time (tests that fail a task mid-run, latency runs).
        Dropped in the failure-free run of `barrierflow chaos` (`Source.pace`)."""
        if not (
            isinstance(events_per_second, int | float)
            and not isinstance(events_per_second, bool)
            and 0 < events_per_second < math.inf
        ):
            raise ConfigurationError(
                f"events_per_second must be a positive number, got {events_per_second!r}"
            )
        configured = copy.copy(self)
        configured.rate_per_reader = Source.pace(events_per_second)
        return configured

    def storage_locations(self) -> list[str]:
        return [self.file.uri]

    def create_splits(self) -> list[SourceSplit]:
        name = self.file.name
        try:
            if not _fs.is_file(self.file):
                raise SourceError(f"the events file {self.file} does not exist")
            if self.parquet:
                with _fs.open_input_file(self.file) as stream:
                    metadata = pq.ParquetFile(stream).metadata
                return [
                    SourceSplit(f"{name}#{i}", (self.file.uri, i, metadata.row_group(i).num_rows))
                    for i in range(metadata.num_row_groups)
                ]
            with _fs.open_input_file(self.file) as stream:
                size = stream.size()
                pieces = max(self.min_splits, -(-size // self.max_split_bytes))
                cuts = {_line_start_at(stream, size * i // pieces) for i in range(1, pieces)}
        except OSError as error:
            raise SourceError(f"cannot read the events file {self.file}: {error}") from error
        except pa.ArrowInvalid as error:
            raise SourceError(f"{self.file} is not a Parquet file: {error}") from error
        bounds = sorted({0, size} | cuts)
        if len(bounds) == 1:
            bounds = [0, 0]  # an empty file: one empty split
        return [
            SourceSplit(f"{name}@{start}-{end}", (self.file.uri, start, end))
            for start, end in itertools.pairwise(bounds)
        ]

    def create_reader(self, splits: Sequence[SourceSplit]) -> NexmarkFileReader:
        pace = None
        if self.rate_per_reader is not None:
            pace = Pace(self.rate_per_reader, clock=SYSTEM_CLOCK.monotonic)
        return NexmarkFileReader(
            splits, parquet=self.parquet, chunk_bytes=self.chunk_bytes, pace=pace
        )


def _line_start_at(stream: Any, offset: int) -> int:
    """The offset of the first line starting at or after `offset` (the size if none)."""
    if offset == 0:
        return 0
    stream.seek(offset - 1)
    position = offset - 1
    while block := stream.read(1 << 16):
        newline = block.find(b"\n")
        if newline >= 0:
            return position + newline + 1
        position += len(block)
    return position


class NexmarkFileReader(SourceReader):
    """Reads its splits one after another in file order, which is event-time order (so
    `reads_splits_in_turn`). Exactly-once: a split's position moves only past events handed
    out (and bad lines reported), so its snapshot restores exactly. Mailbox thread only."""

    reads_splits_in_turn = True

    def __init__(
        self,
        splits: Sequence[SourceSplit],
        *,
        parquet: bool,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        pace: Pace | None = None,
    ) -> None:
        self._splits = sorted(splits, key=lambda split: split.payload[1])  # offset, group
        self._pace = pace
        self._parquet = parquet
        self._chunk_bytes = chunk_bytes
        self._positions: dict[str, int] = {
            split.split_id: 0 if parquet else split.payload[1] for split in self._splits
        }
        self._current = 0
        """Index in `_splits` of the split being read."""
        self._buffer: _Parsed | None = None
        self._stream: Any = None

    def restore(self, positions: dict[str, Any]) -> None:
        for split in self._splits:
            if split.split_id in positions:
                self._positions[split.split_id] = int(positions[split.split_id])
        self._buffer = None

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def split_ids(self) -> list[str]:
        return [split.split_id for split in self._splits]

    def poll_batch(self, max_records: int) -> list[Any] | None:
        """The next events; a bad line raises `SourceError` naming file, line and offset."""
        while (batch := self.poll_split_batch(max_records)) is not None:
            if batch.bad:
                bad = batch.bad[0]
                raise SourceError(bad.message() if isinstance(bad, BadLine) else bad.error)
            if len(batch.records):
                return _events_of(batch)
        return None

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        if self._pace is not None:
            max_records = self._pace.allowed(max_records)
            if max_records == 0:  # paced: nothing is due yet
                if self._current >= len(self._splits):
                    return None
                return SplitBatch(self._splits[self._current].split_id, [])
        stretch = self._next_stretch(max_records)
        if stretch is None:
            return None
        split_id, buffer, start, stop, bad = stretch
        if buffer is None or stop <= start:
            return SplitBatch(split_id, [], finished=buffer is None, bad=bad)
        batch = buffer.batch.slice(start, stop - start)
        return _arrow_split_batch(split_id, batch, False, bad)

    def _next_stretch(
        self, max_records: int
    ) -> tuple[str, _Parsed | None, int, int, list[BadRecord]] | None:
        """The split being read, its parsed stretch and the rows `start:stop` of it handed
        out now (moving the position past them), with the bad lines after them; the
        stretch is None at the split's end. None once every split is read."""
        while self._current < len(self._splits):
            split = self._splits[self._current]
            if self._buffer is None or self._buffer.exhausted:
                self._buffer = self._read(split)
                if self._buffer is None:
                    self._close_stream()
                    self._current += 1
                    return split.split_id, None, 0, 0, []
            buffer = self._buffer
            start, stop, bad, position = buffer.take(max_records)
            self._positions[split.split_id] = position
            if self._pace is not None:
                self._pace.took(stop - start)
            if stop > start or bad:
                return split.split_id, buffer, start, stop, bad
        return None

    def close(self) -> None:
        self._close_stream()

    # ---- internals -----------------------------------------------------------------------

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _read(self, split: SourceSplit) -> _Parsed | None:
        """The next stretch of `split` parsed (and checked); None at its end."""
        position = self._positions[split.split_id]
        try:
            if self._parquet:
                return self._read_row_group(split, position)
            return self._read_lines(split, position)
        except OSError as error:
            raise SourceError(f"cannot read {split.payload[0]}: {error}") from error

    def _read_row_group(self, split: SourceSplit, position: int) -> _Parsed | None:
        uri, index, rows = split.payload
        if position >= rows:
            return None
        with _fs.open_input_file(_fs.Location(uri)) as stream:
            try:
                table = pq.ParquetFile(stream).read_row_group(index)
                table = table.select(EVENTS_SCHEMA.names).cast(EVENTS_SCHEMA)
            except (pa.ArrowInvalid, KeyError, ValueError) as error:
                raise SourceError(
                    f"{uri}: row group {index} is not in the Nexmark events shape: {error}"
                ) from error
        batch = _one_batch(table.slice(position))
        offsets = np.arange(position, rows + 1, dtype=np.int64)
        return _Parsed.checked(
            batch, offsets, lambda row, reason: _bad_row(split, position + row, reason)
        )

    def _read_lines(self, split: SourceSplit, position: int) -> _Parsed | None:
        uri, _, end = split.payload
        if position >= end:
            return None
        if self._stream is None:
            self._stream = _fs.open_input_file(_fs.Location(uri))
            size = self._stream.size()
            if end > size:
                raise SourceError(
                    f"cannot resume {uri} at byte {end}: the file has only {size} bytes "
                    "(it changed since the job started)"
                )
        stream = self._stream
        stream.seek(position)
        data = stream.read(min(self._chunk_bytes, end - position))
        while position + len(data) < end:  # cut at the last whole line
            newline = data.rfind(b"\n")
            if newline >= 0:
                data = data[: newline + 1]
                break
            more = stream.read(min(self._chunk_bytes, end - position - len(data)))
            if not more:
                raise SourceError(
                    f"{uri} ended before byte {end}: it changed since the job started"
                )
            data += more
        return _parse_lines(split, position, data)


@dataclass
class _Parsed:
    """A parsed stretch of a split: good rows with the offset of each, then maybe a bad one."""

    batch: pa.RecordBatch
    offsets: np.ndarray
    """`offsets[i]`: the position of row i; `offsets[len(batch)]`: the position after the
    last row (where the bad line starts, if any)."""
    bad: BadRecord | None = None
    after_bad: int = 0
    """The position after the bad line."""
    next_row: int = 0
    bad_reported: bool = False

    @property
    def exhausted(self) -> bool:
        return self.next_row >= len(self.batch) and (self.bad is None or self.bad_reported)

    def take(self, max_rows: int) -> tuple[int, int, list[BadRecord], int]:
        """The next rows `start:stop` (and the bad line once they are all out) and the
        position after them."""
        start, stop = self.next_row, min(self.next_row + max_rows, len(self.batch))
        self.next_row = stop
        if stop < len(self.batch) or self.bad is None:
            return start, stop, [], int(self.offsets[stop])
        self.bad_reported = True
        return start, stop, [self.bad], self.after_bad

    @classmethod
    def checked(cls, batch: pa.RecordBatch, offsets: np.ndarray, bad_at: Any) -> _Parsed:
        """`batch` cut before its first row that is not an event, which becomes `bad`."""
        invalid = _first_invalid(batch)
        if invalid is None:
            return cls(batch, offsets)
        row, reason = invalid
        return cls(batch.slice(0, row), offsets[: row + 1], bad_at(row, reason), offsets[row + 1])


def _parse_lines(split: SourceSplit, position: int, data: bytes) -> _Parsed:
    """The events of `data`, whole lines of `split` from byte `position`."""
    try:
        batch = _one_batch(_read_json(data))
    except pa.ArrowInvalid:
        return _parse_lines_with_error(split, position, data)
    starts = _row_starts(data, len(batch))
    offsets = np.append(starts, len(data)) + position

    def bad_at(row: int, reason: str) -> BadRecord:
        begin = int(starts[row])
        return _bad_line(split, position + begin, _line_at(data, begin), reason)

    return _Parsed.checked(batch, offsets, bad_at)


def _line_at(data: bytes, begin: int) -> bytes:
    """The line of `data` starting at `begin`, without its newline."""
    newline = data.find(b"\n", begin)
    return data[begin : len(data) if newline < 0 else newline].rstrip(b"\r")


def _parse_lines_with_error(split: SourceSplit, position: int, data: bytes) -> _Parsed:
    """`_parse_lines` for data pyarrow refuses: find the first bad line by bisection, parse
    the lines before it, report it."""
    spans = _line_spans(data)
    low, high = 0, len(spans)  # lines[:low] parse, lines[:high] do not
    while high - low > 1:
        middle = (low + high) // 2
        try:
            _read_json(data[: spans[middle - 1][1]])
            low = middle
        except pa.ArrowInvalid:
            high = middle
    begin, stop = spans[high - 1]
    try:
        _read_json(data[begin:stop])
        reason = "is not valid JSON for a Nexmark event"
    except pa.ArrowInvalid as error:
        message = re.sub(r"\s+in row \d+$", "", str(error).strip())
        reason = f"is not a valid Nexmark event ({message})"
    good = _parse_lines(split, position, data[:begin]) if begin else None
    bad = _bad_line(split, position + begin, _line_at(data, begin), reason)
    if good is not None and good.bad is not None:
        return good  # an earlier line is bad in another way: report that one first
    batch = good.batch if good is not None else _one_batch(EVENTS_SCHEMA.empty_table())
    offsets = good.offsets if good is not None else np.array([position], dtype=np.int64)
    return _Parsed(batch, offsets, bad, position + stop)


def _read_json(data: bytes) -> pa.Table:
    return pajson.read_json(
        io.BytesIO(data),
        read_options=pajson.ReadOptions(use_threads=False, block_size=max(len(data), 1 << 16)),
        parse_options=pajson.ParseOptions(
            explicit_schema=EVENTS_SCHEMA, unexpected_field_behavior="ignore"
        ),
    )


def _row_starts(data: bytes, rows: int) -> np.ndarray:
    """The byte offsets in `data` of the lines pyarrow made rows of (it skips blank lines)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(raw == 10)
    starts = np.concatenate(([0], newlines + 1))
    if starts[-1] >= len(data):
        starts = starts[:-1]  # the data ends with a newline: no line starts there
    if len(starts) == rows:
        return starts.astype(np.int64)
    # Blank (whitespace-only) lines: keep the lines holding some other byte.
    solid = np.concatenate(([0], np.cumsum(~np.isin(raw, (9, 10, 13, 32)))))
    ends = np.append(newlines, len(data))[: len(starts)]
    kept = starts[solid[ends] > solid[starts]]
    if len(kept) != rows:
        raise SourceError(f"cannot match {rows} parsed rows to {len(kept)} lines")
    return kept.astype(np.int64)


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end including the newline) of every non-blank line of `data`."""
    spans, start = [], 0
    while start < len(data):
        newline = data.find(b"\n", start)
        stop = len(data) if newline < 0 else newline + 1
        if data[start:stop].strip():
            spans.append((start, stop))
        start = stop
    return spans


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    batches = table.combine_chunks().to_batches()
    if len(batches) == 1:
        return batches[0]
    return pa.RecordBatch.from_pylist([], schema=EVENTS_SCHEMA)


_REQUIRED = (
    (PERSON, "person", TABLE_NAMES[Person]),
    (AUCTION, "auction", TABLE_NAMES[Auction]),
    (BID, "bid", TABLE_NAMES[Bid]),
)
"""Each event type, its struct column and the fields that struct must have."""


def _first_invalid(batch: pa.RecordBatch) -> tuple[int, str] | None:
    """The first row that is not an event and why, or None."""
    if not len(batch):
        return None
    event_type = batch.column("event_type")
    valid = pa.array(np.zeros(len(batch), dtype=bool))
    for kind, column, names in _REQUIRED:
        struct = batch.column(column)
        ok = pc.fill_null(pc.equal(event_type, kind), False)
        ok = pc.and_(ok, struct.is_valid())
        for name in names:
            ok = pc.and_(ok, struct.field(name).is_valid())
        valid = pc.or_(valid, ok)
    if pc.all(valid).as_py():
        return None
    row = pc.index(valid, False).as_py()
    value = batch.slice(row, 1).to_pylist()[0]
    kind = value.get("event_type")
    if kind not in (0, 1, 2):
        return row, f"is not a Nexmark event: event_type must be 0, 1 or 2, got {kind!r}"
    _, column, names = _REQUIRED[kind]
    if value[column] is None:
        return row, f"is not a Nexmark event: an event of type {kind} needs its '{column}' object"
    missing = next(name for name in names if value[column][name] is None)
    return row, f"is not a Nexmark event: its '{column}' object lacks '{missing}'"


def _bad_line(split: SourceSplit, offset: int, raw: bytes, reason: str) -> BadLine:
    uri = split.payload[0]
    line = line_number_at(_fs.Location(uri), offset)
    return BadLine(
        split.split_id,
        offset,
        raw,
        f"line {line} of {uri} {reason}",
        "byte offset",
        file=uri,
        line=line,
        reason=reason,
    )


def _bad_row(split: SourceSplit, row: int, reason: str) -> BadRecord:
    uri, index, _ = split.payload
    return BadRecord(
        split.split_id, int(row), None, f"row {row} of row group {index} of {uri} {reason}", "row"
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
