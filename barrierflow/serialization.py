"""Serialization schemas and encoders with PyFlink's names (`pyflink.common.serialization`):
how a connector turns a record into bytes and bytes into a record.

PyFlink's schemas wrap Java objects; these are plain Python, with the methods a connector
calls: `serialize(element) -> bytes` and `deserialize(message) -> element`. Kafka takes them
as value and key schemas; `Encoder.simple_string_encoder()` writes the lines of a `FileSink`.

>>> SimpleStringSchema().serialize("héllo")
b'h\\xc3\\xa9llo'
>>> SimpleStringSchema().deserialize(b"h\\xc3\\xa9llo")
'héllo'
>>> Encoder.simple_string_encoder().encode("a line")
b'a line\\n'
"""

from __future__ import annotations

import codecs
from typing import Any

from barrierflow.errors import ConfigurationError

__all__ = [
    "ByteArraySchema",
    "DeserializationSchema",
    "Encoder",
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


class Encoder:
    """Writes one record of a row-format file sink (`FileSink.for_row_format`).

    `simple_string_encoder` writes each record's text and a newline, as Flink's
    `SimpleStringEncoder` writes `toString()` and `\\n`.
    """

    def __init__(self, charset: str = "UTF-8") -> None:
        self.charset = _checked_charset(charset)

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> Encoder:
        return Encoder(charset_name)

    def encode(self, element: Any) -> bytes:
        text = element if isinstance(element, str) else str(element)
        return (text + "\n").encode(self.charset)

    def __repr__(self) -> str:
        return f"Encoder.simple_string_encoder({self.charset!r})"
