"""Events files: generated Nexmark events in flink-nexmark's table shape, JSON Lines or Parquet.

Each event is one row `{"event_type": 0|1|2, "person": {...} or null, "auction": {...} or
null, "bid": {...} or null}` with flink-nexmark's column names (`emailAddress`,
`dateTime`, ...) and times in epoch milliseconds (`EVENTS_SCHEMA`). A path ending in
`.parquet` gets Parquet (struct columns, null structs, one row group per chunk written);
any other path JSON Lines, one compact object per line. Both are read by DuckDB
(`read_json`, `read_parquet`) and by `NexmarkFileSource`.

>>> import pathlib, tempfile
>>> from barrierflow.nexmark.generator import GeneratorConfig, generate_events
>>> path = pathlib.Path(tempfile.mkdtemp()) / "events.jsonl"
>>> write_events(path, GeneratorConfig(), 1_000)
1000
>>> line = path.read_text().splitlines()[0]
>>> line[:60]
'{"event_type":0,"person":{"id":1000,"name":"Walter Spencer",'
>>> import json
>>> from barrierflow.nexmark.model import from_table_row
>>> from_table_row(json.loads(line)) == generate_events(GeneratorConfig(), 1)[0]
True
"""

from __future__ import annotations

import functools
import os
import time
import typing
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from barrierflow import _fs
from barrierflow.errors import ConfigurationError
from barrierflow.nexmark.generator import GeneratedEvents, GeneratorConfig, generate_numbers
from barrierflow.nexmark.model import (
    AUCTION,
    BID,
    PERSON,
    TABLE_NAMES,
    Auction,
    Bid,
    Event,
    Person,
)

__all__ = [
    "DEFAULT_CHUNK_EVENTS",
    "EVENTS_SCHEMA",
    "events_from_record_batch",
    "is_parquet",
    "record_batch_of",
    "write_events",
]

DEFAULT_CHUNK_EVENTS = 131_072
"""Events generated and written at a time (bounds memory; a Parquet row group each)."""

_KINDS: tuple[tuple[int, str, type], ...] = (
    (PERSON, "person", Person),
    (AUCTION, "auction", Auction),
    (BID, "bid", Bid),
)


@functools.cache
def _struct_type(cls: type) -> pa.StructType:
    types = {int: pa.int64(), str: pa.string()}
    hints = typing.get_type_hints(cls)
    return pa.struct(
        [
            pa.field(column, types[hints[field]])
            for field, column in zip(cls._fields, TABLE_NAMES[cls], strict=True)
        ]
    )


EVENTS_SCHEMA = pa.schema(
    [pa.field("event_type", pa.int32())]
    + [pa.field(column, _struct_type(cls)) for _, column, cls in _KINDS]
)
"""One row per event: its type and the struct of its kind (the other two null)."""


def is_parquet(path: str | os.PathLike[str]) -> bool:
    """Whether an events file at `path` is Parquet (its name ends in `.parquet`)."""
    return os.fspath(path).lower().endswith(".parquet")


def write_events(
    path: str | os.PathLike[str],
    config: GeneratorConfig,
    count: int,
    *,
    chunk_events: int = DEFAULT_CHUNK_EVENTS,
) -> int:
    """Write events `0 .. count - 1` of `config` to `path` (replacing it); the events written.

    Parquet when `path` ends in `.parquet`, else JSON Lines; a missing local folder is
    made. A `base_time` of None is fixed to the wall clock now. Memory stays bounded:
    `chunk_events` events at a time.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ConfigurationError(f"write_events: count must be an int >= 0, got {count!r}")
    if isinstance(chunk_events, bool) or not isinstance(chunk_events, int) or chunk_events < 1:
        raise ConfigurationError(
            f"write_events: chunk_events must be an int >= 1, got {chunk_events!r}"
        )
    if config.base_time is None:
        config = config.with_base_time(time.time_ns() // 1_000_000)
    location = _fs.location(path)
    parquet = is_parquet(path)
    if _fs.is_local(location):
        _fs.make_dirs(location.parent)
    with _fs.open_output_stream(location) as stream:
        writer = pq.ParquetWriter(stream, EVENTS_SCHEMA) if parquet else None
        try:
            for first in range(0, count, chunk_events):
                numbers = range(first, min(first + chunk_events, count))
                generated = generate_numbers(config, numbers)
                if writer is not None:
                    writer.write_batch(record_batch_of(generated), row_group_size=len(numbers))
                else:
                    stream.write(_string_data(_json_lines(generated)))
            if writer is not None and count == 0:
                writer.write_table(EVENTS_SCHEMA.empty_table())
        finally:
            if writer is not None:
                writer.close()
    return count


# ---- Arrow -----------------------------------------------------------------------------------


def record_batch_of(events: GeneratedEvents | Sequence[Event]) -> pa.RecordBatch:
    """Generated events (or any model events) as one `EVENTS_SCHEMA` record batch."""
    if not isinstance(events, GeneratedEvents):
        return _record_batch_of_events(events)
    kinds = events.kinds
    columns: dict[int, list[pa.Array]] = {
        PERSON: _row_columns(Person, events.persons),
        AUCTION: _row_columns(Auction, events.auctions),
        BID: [
            pa.array(column, type=field.type)
            for column, field in zip(events.bid_columns, _struct_type(Bid), strict=True)
        ],
    }
    return _assemble(kinds, columns)


def event_times(batch: pa.RecordBatch | pa.Table) -> np.ndarray:
    """Each event's `dateTime` (epoch ms, int64), whichever of the three structs holds it:
    flink-nexmark's computed `dateTime` column, for event time without Python objects."""
    times = pc.coalesce(
        *(pc.struct_field(batch.column(column), "dateTime") for _, column, _ in _KINDS)
    )
    if isinstance(times, pa.ChunkedArray):
        times = times.combine_chunks()
    return times.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def events_from_record_batch(batch: pa.RecordBatch | pa.Table) -> list[Event]:
    """The model events of an `EVENTS_SCHEMA` batch, in order (assumes a valid batch:
    `event_type` 0, 1 or 2 and its struct and fields set; a reader checks that first)."""
    kinds = batch.column("event_type").to_numpy(zero_copy_only=False)
    if not len(kinds):
        return []
    out: list[Any] = [None] * len(kinds)
    new = tuple.__new__
    for kind, column, cls in _KINDS:
        where = np.flatnonzero(kinds == kind)
        if not len(where):
            continue
        structs = batch.column(column)
        if len(where) < len(kinds):
            structs = structs.take(pa.array(where))
        if isinstance(structs, pa.ChunkedArray):
            structs = structs.combine_chunks()
        fields = [structs.field(name).to_pylist() for name in TABLE_NAMES[cls]]
        rows = [new(cls, row) for row in zip(*fields, strict=True)]
        if len(where) == len(kinds):
            return rows
        for index, row in zip(where.tolist(), rows, strict=True):
            out[index] = row
    return out


def _row_columns(cls: type, rows: Sequence[Any]) -> list[pa.Array]:
    struct = _struct_type(cls)
    if not rows:
        return [pa.array([], type=field.type) for field in struct]
    return [
        pa.array(column, type=field.type)
        for column, field in zip(zip(*rows, strict=True), struct, strict=True)
    ]


def _record_batch_of_events(events: Sequence[Event]) -> pa.RecordBatch:
    kinds = np.array([_KIND_OF[type(event)] for event in events], dtype=np.int8)
    columns = {
        kind: _row_columns(cls, [e for e in events if type(e) is cls]) for kind, _, cls in _KINDS
    }
    return _assemble(kinds, columns)


_KIND_OF = {cls: kind for kind, _, cls in _KINDS}


def _assemble(kinds: np.ndarray, columns: dict[int, list[pa.Array]]) -> pa.RecordBatch:
    """The table-shaped batch: each kind's struct spread over its rows, null elsewhere."""
    arrays: list[pa.Array] = [pa.array(kinds.astype(np.int32), type=pa.int32())]
    for kind, _, cls in _KINDS:
        struct_type = _struct_type(cls)
        struct = pa.StructArray.from_arrays(columns[kind], fields=list(struct_type))
        mine = kinds == kind
        if mine.all():
            arrays.append(struct)
            continue
        index = np.cumsum(mine) - 1
        arrays.append(struct.take(pa.array(index, mask=~mine, type=pa.int64())))
    return pa.RecordBatch.from_arrays(arrays, schema=EVENTS_SCHEMA)


# ---- JSON Lines ------------------------------------------------------------------------------


def _json_lines(events: GeneratedEvents) -> pa.StringArray:
    """Each event's JSON line (with its newline), in order, built column-wise in Arrow.

    Generated strings hold only letters, digits, spaces and `_@.:/?&=-`: nothing to escape.
    """
    parts: list[pa.Array] = []
    kinds = events.kinds
    for kind, column, cls in _KINDS:
        if kind == BID:
            values: list[Any] = list(events.bid_columns)
        else:
            rows = events.persons if kind == PERSON else events.auctions
            values = list(zip(*rows, strict=True)) if rows else []
        if not values or not len(values[0]):
            continue
        pieces: list[Any] = []
        opening = f'{{"event_type":{kind},' + "".join(
            f'"{other}":null,' for _, other, _ in _KINDS[:kind]
        )
        text = opening + f'"{column}":{{'
        for index, (name, field) in enumerate(
            zip(TABLE_NAMES[cls], _struct_type(cls), strict=True)
        ):
            quoted = field.type == pa.string()
            text += ("," if index else "") + f'"{name}":' + ('"' if quoted else "")
            pieces.append(pa.scalar(text))
            array = pa.array(values[index], type=pa.string() if quoted else pa.int64())
            pieces.append(array if quoted else array.cast(pa.string()))
            text = '"' if quoted else ""
        text += "}" + "".join(f',"{other}":null' for _, other, _ in _KINDS[kind + 1 :]) + "}\n"
        pieces.append(pa.scalar(text))
        parts.append(pc.binary_join_element_wise(*pieces, ""))
    lines = pa.concat_arrays(parts) if len(parts) > 1 else parts[0] if parts else None
    if lines is None:
        return pa.array([], type=pa.string())
    if len(parts) == 1:
        return lines
    # Concatenated by kind: put them back in event order.
    order = np.empty(len(kinds), dtype=np.int64)
    start = 0
    for kind, _, _ in _KINDS:
        where = np.flatnonzero(kinds == kind)
        order[where] = np.arange(start, start + len(where))
        start += len(where)
    return lines.take(pa.array(order))


def _string_data(array: pa.StringArray) -> pa.Buffer:
    """The bytes of all the strings of `array`, back to back."""
    if not len(array):
        return pa.py_buffer(b"")
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    first, last = offsets[array.offset], offsets[array.offset + len(array)]
    return array.buffers()[2][first:last]
