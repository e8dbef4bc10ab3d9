"""How a FileSink writes rows into one part file and reads them back: JSON Lines or Parquet.

A `PartFileFormat` turns a batch of rows into something a `PartFile` appends (checking
every row first, so a bad row fails before anything is written), opens part files on a
stream, and reads a committed file back (`FileSink.committed_output`). Spark reads both:
`spark.read.json(path)` and `spark.read.parquet(path)`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from barrierflow.errors import SinkError

_encode_string = json.encoder.encode_basestring  # type: ignore[attr-defined]
"""JSON text of a str, as JSONEncoder(ensure_ascii=False) writes it (C when available)."""

PARQUET_ROW_GROUP_ROWS = 64 * 1024
"""Rows buffered in memory before a Parquet part file gets a row group."""


class PartFile(ABC):
    """One open part file: appends encoded batches, knows its size, closes."""

    @abstractmethod
    def append(self, encoded: Any) -> None:
        """Append what `PartFileFormat.encode` made of some rows."""

    @abstractmethod
    def size(self) -> int:
        """Bytes written so far (for Parquet, plus the in-memory size of buffered rows)."""

    @abstractmethod
    def close(self) -> None:
        """Flush everything and close the stream: the file is complete."""


class PartFileFormat(ABC):
    """Encodes rows for part files of one sink; `prefix` starts and `extension` ends every
    file name."""

    extension: str
    prefix = "part"

    @abstractmethod
    def encode(self, rows: list[Any]) -> Any:
        """The rows in this format, or a `SinkError` naming the first row that does not fit."""

    def encode_arrow(self, data: pa.RecordBatch) -> Any:
        """What `append` takes, from Arrow data whose rows are dicts (column -> value)."""
        return self.encode(data.to_pylist())

    @abstractmethod
    def open(self, stream: Any) -> PartFile:
        """A part file writing to `stream` (a pyarrow output stream), which it closes."""

    @abstractmethod
    def read(self, data: bytes) -> list[Any]:
        """The rows of a committed part file."""


def part_file_format(name: str, schema: pa.Schema | None = None) -> PartFileFormat:
    """The format called `name` ("json", "jsonl" or "parquet")."""
    if name in ("json", "jsonl"):
        if schema is not None:
            raise ValueError("a schema is only used by the parquet format")
        return JsonLinesFormat()
    if name == "parquet":
        return ParquetFormat(schema)
    raise ValueError(f"unknown file format {name!r}: use 'json' or 'parquet'")


# ---- JSON Lines --------------------------------------------------------------------------------


class JsonLinesFormat(PartFileFormat):
    """One JSON value per line: tuples and lists become arrays, dicts objects."""

    extension = ".jsonl"

    def __init__(self) -> None:
        self._encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def encode(self, rows: list[Any]) -> bytes:
        encode = self._encode
        try:
            return ("\n".join(map(encode, rows)) + "\n").encode("utf-8")
        except (TypeError, ValueError):
            pass  # find the culprit
        for row in rows:
            try:
                encode(row).encode("utf-8")
            except (TypeError, ValueError) as error:
                raise SinkError(
                    f"cannot write a record of type {type(row).__name__} as JSON: {error}"
                ) from None
        raise AssertionError("a batch failed to encode but each record encodes")

    def encode_arrow(self, data: pa.RecordBatch) -> bytes:
        """JSON Lines without a dict per row: each column is encoded to JSON text once
        (numbers by Arrow's cast, strings by json's C escaper, other types per value), and
        each line is one format of its row's texts. Equal to `encode(data.to_pylist())`."""
        if data.num_rows == 0:
            return b""
        names = data.schema.names
        texts = [_json_texts(column, self._encode) for column in data.columns]
        if len(set(names)) == len(names) and all(text is not None for text in texts):
            keys = [self._encode(str(name)) for name in names]
            template = "{" + ",".join(f"{key}:%s" for key in _percent_safe(keys)) + "}"
            lines = [template % row for row in zip(*texts, strict=True)]
            return ("\n".join(lines) + "\n").encode("utf-8")
        return self.encode(data.to_pylist())

    def open(self, stream: Any) -> PartFile:
        return ByteStreamPartFile(stream)

    def read(self, data: bytes) -> list[Any]:
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line]


def _percent_safe(keys: list[str]) -> list[str]:
    return [key.replace("%", "%%") for key in keys]


def _json_texts(column: pa.Array, encode: Any) -> list[str] | None:
    """The JSON text of every value of `column` (None: the type is not handled here)."""
    kind = column.type
    if column.null_count and not (pa.types.is_integer(kind) or pa.types.is_string(kind)):
        return None
    if pa.types.is_integer(kind):
        return pc.cast(column, pa.string()).fill_null("null").to_pylist()
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if column.null_count:
            return [
                "null" if value is None else _encode_string(value) for value in column.to_pylist()
            ]
        return list(map(_encode_string, column.to_pylist()))
    if pa.types.is_boolean(kind):
        return ["true" if value else "false" for value in column.to_pylist()]
    if pa.types.is_floating(kind):
        values = column.to_pylist()
        try:
            return list(map(encode, values))
        except ValueError:  # NaN or infinity: json.dumps writes them, encode() does too
            return None
    return None


class ByteStreamPartFile(PartFile):
    """A part file of encoded records written one after the other to an open stream (JSON
    Lines here, an `Encoder`'s bytes in `connectors.file_system`)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._size = 0

    def append(self, encoded: bytes) -> None:
        self._stream.write(encoded)
        self._size += len(encoded)

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self._stream.close()


# ---- Parquet -----------------------------------------------------------------------------------


class ParquetFormat(PartFileFormat):
    """Rows are dicts (column -> value); the schema is given, or inferred from the first
    batch this sink writes and kept for every later file, so all part files agree."""

    extension = ".parquet"

    def __init__(self, schema: pa.Schema | None = None) -> None:
        self.schema = schema

    def encode(self, rows: list[Any]) -> pa.Table:
        for row in rows:
            if not isinstance(row, dict):
                raise SinkError(
                    f"the parquet format writes dicts (column -> value), got a record of "
                    f"type {type(row).__name__}: {row!r:.200}"
                )
        if self.schema is None:
            self.schema = _inferred_schema(rows)
        names = set(self.schema.names)
        for row in rows:
            if not row.keys() <= names:
                extra = sorted(map(str, row.keys() - names))
                raise SinkError(
                    f"a row has column(s) {extra} that the parquet schema "
                    f"({', '.join(self.schema.names)}) lacks: {row!r:.200}"
                )
        try:
            return pa.Table.from_pylist(rows, schema=self.schema)
        except (pa.ArrowException, TypeError, ValueError):
            pass  # find the culprit
        for row in rows:
            try:
                pa.Table.from_pylist([row], schema=self.schema)
            except (pa.ArrowException, TypeError, ValueError) as error:
                columns = ", ".join(f"{f.name}: {f.type}" for f in self.schema)
                raise SinkError(
                    f"a row does not fit the parquet schema ({columns}): {error}: {row!r:.200}"
                ) from None
        raise AssertionError("a batch failed to convert but each row converts")

    def encode_arrow(self, data: pa.RecordBatch) -> pa.Table:
        """The batch as it is, cast to the sink's schema (inferred from the first batch)."""
        if self.schema is None:
            self.schema = data.schema
        schema = self.schema
        if data.schema.equals(schema):
            return pa.Table.from_batches([data])
        extra = sorted(set(data.schema.names) - set(schema.names))
        if extra:
            raise SinkError(
                f"a batch has column(s) {extra} that the parquet schema "
                f"({', '.join(schema.names)}) lacks"
            )
        try:
            columns = [
                data.column(field.name).cast(field.type)
                if field.name in data.schema.names
                else pa.nulls(data.num_rows, field.type)
                for field in schema
            ]
            return pa.Table.from_arrays(columns, schema=schema)
        except (pa.ArrowException, ValueError) as error:
            columns = ", ".join(f"{f.name}: {f.type}" for f in self.schema)
            given = ", ".join(f"{f.name}: {f.type}" for f in data.schema)
            raise SinkError(
                f"a batch ({given}) does not fit the parquet schema ({columns}): {error}"
            ) from None

    def open(self, stream: Any) -> PartFile:
        assert self.schema is not None, "encode runs before the first file opens"
        return _ParquetFile(stream, self.schema)

    def read(self, data: bytes) -> list[Any]:
        return pq.read_table(pa.BufferReader(data)).to_pylist()


def _inferred_schema(rows: list[dict[str, Any]]) -> pa.Schema:
    try:
        return pa.Table.from_pylist(rows).schema
    except (pa.ArrowException, TypeError, ValueError) as error:
        raise SinkError(
            f"cannot infer a parquet schema from the first rows ({error}): give one with "
            "FileSink.with_format('parquet', schema=...)"
        ) from None


class _ParquetFile(PartFile):
    def __init__(self, stream: Any, schema: pa.Schema) -> None:
        self._stream = stream
        self._writer = pq.ParquetWriter(stream, schema)
        self._buffered: list[pa.Table] = []
        self._buffered_rows = 0
        self._buffered_bytes = 0

    def append(self, encoded: pa.Table) -> None:
        self._buffered.append(encoded)
        self._buffered_rows += encoded.num_rows
        self._buffered_bytes += encoded.nbytes
        if self._buffered_rows >= PARQUET_ROW_GROUP_ROWS:
            self._flush()

    def size(self) -> int:
        return self._stream.tell() + self._buffered_bytes

    def close(self) -> None:
        self._flush()
        self._writer.close()
        self._stream.close()

    def _flush(self) -> None:
        if self._buffered:
            self._writer.write_table(pa.concat_tables(self._buffered))
            self._buffered, self._buffered_rows, self._buffered_bytes = [], 0, 0
