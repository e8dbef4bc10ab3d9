"""Serialization schemas and encoders with PyFlink's names (`pyflink.common.serialization`):
how a connector turns a record into bytes and bytes into a record.

PyFlink's schemas wrap Java objects; these are plain Python, with the methods a connector
calls: `serialize(element) -> bytes` and `deserialize(message) -> element`. Kafka takes them
as value and key schemas; `Encoder.simple_string_encoder()` writes the lines of a `FileSink`.
The JSON row schemas (PyFlink's `pyflink.datastream.formats.json`) live here too: a row type
(`Types.ROW_NAMED`) names the JSON object's fields.

>>> SimpleStringSchema().serialize("héllo")
b'h\\xc3\\xa9llo'
>>> SimpleStringSchema().deserialize(b"h\\xc3\\xa9llo")
'héllo'
>>> Encoder.simple_string_encoder().encode("a line")
b'a line\\n'
"""

from __future__ import annotations

import codecs
import json
from typing import Any

from barrierflow.core.record_text import record_text
from barrierflow.core.row import Row
from barrierflow.core.typeinfo import RowTypeInfo, TypeInformation, check_type_info
from barrierflow.errors import ConfigurationError, JobDefinitionError

__all__ = [
    "BulkWriterFactory",
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
    "JsonRowDeserializationSchema",
    "JsonRowSerializationSchema",
    "RowFieldExtractorSchema",
    "SerializationSchema",
    "SimpleStringSchema",
]


def _checked_charset(charset: str) -> str:
    """The charset's Python codec name; an unknown one is refused when the job is built."""
    try:
        return codecs.lookup(charset).name
    except (LookupError, TypeError):
        raise ConfigurationError(f"unknown charset {charset!r}") from None


class SerializationSchema:
    """Turns a record into the bytes a sink writes (Kafka's value or key)."""

    def serialize(self, element: Any) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} does not implement serialize()")


class DeserializationSchema:
    """Turns the bytes a source reads into a record."""

    def deserialize(self, message: bytes) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement deserialize()")


class SimpleStringSchema(SerializationSchema, DeserializationSchema):
    """Strings to bytes and back in one charset (UTF-8 unless named).

    A record that is not a `str` is written as its text (`str(element)`), as a declared
    `Types.STRING()` would have made it.
    """

    def __init__(self, charset: str = "UTF-8") -> None:
        self.charset = _checked_charset(charset)

    def serialize(self, element: Any) -> bytes:
        text = element if isinstance(element, str) else str(element)
        return text.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return bytes(message).decode(self.charset)

    def __repr__(self) -> str:
        return f"SimpleStringSchema({self.charset!r})"


class ByteArraySchema(SerializationSchema, DeserializationSchema):
    """Bytes as they are, both ways.

    >>> ByteArraySchema().deserialize(b"\\x00\\x01")
    b'\\x00\\x01'
    """

    def serialize(self, element: Any) -> bytes:
        if not isinstance(element, bytes | bytearray | memoryview):
            raise TypeError(f"ByteArraySchema writes bytes, got {type(element).__name__}")
        return bytes(element)

    def deserialize(self, message: bytes) -> bytes:
        return bytes(message)

    def __repr__(self) -> str:
        return "ByteArraySchema()"


class RowFieldExtractorSchema(SerializationSchema):
    """One field of a row, which must already be bytes (a Kafka key or value).

    >>> RowFieldExtractorSchema(1).serialize(Row(b"key", b"value"))
    b'value'
    """

    def __init__(self, field_index: int) -> None:
        if isinstance(field_index, bool) or not isinstance(field_index, int) or field_index < 0:
            raise ConfigurationError(
                f"RowFieldExtractorSchema needs a field index >= 0, got {field_index!r}"
            )
        self.field_index = field_index

    def serialize(self, element: Any) -> bytes:
        field = element[self.field_index]
        if not isinstance(field, bytes | bytearray):
            raise TypeError(
                f"RowFieldExtractorSchema: field {self.field_index} is "
                f"{type(field).__name__}, not bytes"
            )
        return bytes(field)


class Encoder:
    """Writes one record of a row-format file sink (`FileSink.for_row_format`).

    `simple_string_encoder` writes each record's text and a newline, as Flink's
    `SimpleStringEncoder` writes `toString()` and `\\n`.
    """

    def __init__(self, charset: str = "UTF-8", type_info: TypeInformation | None = None) -> None:
        self.charset = _checked_charset(charset)
        self.type_info = type_info
        """The records' declared type (the stream's), which the text follows as Flink's
        `toString()` of that type does: `+I[a, 1]` for a row, `(a,1)` for a tuple."""

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        return Encoder(charset_name)

    def for_type(self, type_info: TypeInformation | None) -> Encoder:
        """This encoder for records of `type_info` (the sink's input stream's)."""
        return Encoder(self.charset, type_info)

    def encode(self, element: Any) -> bytes:
        if self.type_info is not None:
            text = record_text(element, self.type_info, java_rows=True)
        else:
            text = element if isinstance(element, str) else str(element)
        return (text + "\n").encode(self.charset)

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset!r})"


def _row_type(type_info: Any, what: str) -> RowTypeInfo:
    if type_info is None:
        raise ConfigurationError(f"{what} needs a row type: .type_info(Types.ROW_NAMED(...))")
    check_type_info(type_info, f"{what}'s type_info")
    if not isinstance(type_info, RowTypeInfo):
        raise ConfigurationError(f"{what} needs a row type (Types.ROW_NAMED), got {type_info!r}")
    return type_info


def _plain(value: Any) -> Any:
    """A record's value as JSON: rows are objects by field name, the rest as json writes
    them, anything else (dates, decimals) as its text."""
    if isinstance(value, Row):
        names = value.get_field_names()
        if names is None:
            return [_plain(item) for item in value]
        return {name: _plain(item) for name, item in zip(names, value, strict=True)}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class JsonRowSerializationSchema(SerializationSchema):
    """A record as a JSON object named by a row type's fields (UTF-8 bytes).

    >>> from barrierflow.core.typeinfo import Types
    >>> schema = JsonRowSerializationSchema.builder().with_type_info(
    ...     Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])).build()
    >>> schema.serialize(("hello", 2))
    b'{"word":"hello","count":2}'
    """

    def __init__(self, type_info: RowTypeInfo) -> None:
        self.type_info = type_info

    @staticmethod
    def builder() -> JsonRowSerializationSchema.Builder:
        return JsonRowSerializationSchema.Builder()

    class Builder:
        """PyFlink's builder: `with_type_info(row_type).build()`."""

        def __init__(self) -> None:
            self._type_info: TypeInformation | None = None

        def with_type_info(self, type_info: TypeInformation) -> JsonRowSerializationSchema.Builder:
            self._type_info = type_info
            return self

        def build(self) -> JsonRowSerializationSchema:
            return JsonRowSerializationSchema(
                _row_type(self._type_info, "JsonRowSerializationSchema")
            )

    def serialize(self, element: Any) -> bytes:
        row = self.type_info.conform(element)
        return json.dumps(_plain(row), separators=(",", ":"), ensure_ascii=False).encode()


class JsonRowDeserializationSchema(DeserializationSchema):
    """A JSON object as a `Row` with a row type's field names; a missing field is None
    (or an error with `fail_on_missing_field()`); a message that is not a JSON object is an
    error, or no record (None) with `ignore_parse_errors()`.

    >>> from barrierflow.core.typeinfo import Types
    >>> schema = JsonRowDeserializationSchema.builder().type_info(
    ...     Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])).build()
    >>> schema.deserialize(b'{"count": 2, "word": "hello"}')
    Row(word='hello', count=2)
    """

    def __init__(
        self, type_info: RowTypeInfo, fail_on_missing_field: bool, ignore_parse_errors: bool
    ) -> None:
        self.type_info = type_info
        self.fail_on_missing_field = fail_on_missing_field
        self.ignore_parse_errors = ignore_parse_errors

    @staticmethod
    def builder() -> JsonRowDeserializationSchema.Builder:
        return JsonRowDeserializationSchema.Builder()

    class Builder:
        """PyFlink's builder: `type_info(row_type)`, `fail_on_missing_field()`,
        `ignore_parse_errors()`, `build()` (a JSON schema string is not supported)."""

        def __init__(self) -> None:
            self._type_info: TypeInformation | None = None
            self._fail_on_missing_field = False
            self._ignore_parse_errors = False

        def type_info(self, type_info: TypeInformation) -> JsonRowDeserializationSchema.Builder:
            self._type_info = type_info
            return self

        def json_schema(self, json_schema: str) -> JsonRowDeserializationSchema.Builder:
            raise ConfigurationError(
                "JsonRowDeserializationSchema: a JSON schema string is not supported, "
                "give the row type: .type_info(Types.ROW_NAMED(...))"
            )

        def fail_on_missing_field(self) -> JsonRowDeserializationSchema.Builder:
            self._fail_on_missing_field = True
            return self

        def ignore_parse_errors(self) -> JsonRowDeserializationSchema.Builder:
            self._ignore_parse_errors = True
            return self

        def build(self) -> JsonRowDeserializationSchema:
            row_type = _row_type(self._type_info, "JsonRowDeserializationSchema")
            return JsonRowDeserializationSchema(
                row_type, self._fail_on_missing_field, self._ignore_parse_errors
            )

    def deserialize(self, message: bytes) -> Row | None:
        try:
            document = json.loads(bytes(message))
            if not isinstance(document, dict):
                raise ValueError(f"not a JSON object: {bytes(message)[:80]!r}")
        except ValueError:
            if self.ignore_parse_errors:
                return None
            raise
        names = self.type_info.field_names
        if self.fail_on_missing_field:
            missing = [name for name in names if name not in document]
            if missing:
                raise ValueError(
                    f"JSON message lacks the fields {missing}: {bytes(message)[:80]!r}"
                )
        return self.type_info.conform(document)


_BULK_WRITER_REFUSED = (
    "BulkWriterFactory wraps a Java bulk writer, which barrierflow cannot run: write Parquet "
    "with barrierflow.connectors.files.FileSink.for_rows(path).with_format('parquet')"
)


class BulkWriterFactory:
    """PyFlink's wrapper of a Java `BulkWriter.Factory` (Parquet, ORC, Avro writers for
    `FileSink.for_bulk_format`): refused when constructed, naming barrierflow's Parquet
    writer."""

    def __init__(self, j_bulk_writer_factory: Any = None) -> None:
        raise JobDefinitionError(_BULK_WRITER_REFUSED)
