"""barrierflow.serialization: PyFlink's schemas (pyflink.common.serialization) in plain Python."""

from __future__ import annotations

import pytest

from barrierflow.errors import ConfigurationError
from barrierflow.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)


@pytest.mark.parametrize(
    ("schema", "element", "message"),
    [
        (SimpleStringSchema(), "héllo", b"h\xc3\xa9llo"),
        (SimpleStringSchema("ISO-8859-1"), "héllo", b"h\xe9llo"),
        (SimpleStringSchema(), "", b""),
        (ByteArraySchema(), b"\x00\xff", b"\x00\xff"),
    ],
)
def test_a_schema_serializes_and_deserializes_a_record(schema, element, message):
    assert schema.serialize(element) == message
    assert schema.deserialize(message) == element
    assert isinstance(schema, SerializationSchema)
    assert isinstance(schema, DeserializationSchema)


def test_simple_string_schema_writes_a_non_string_as_its_text():
    assert SimpleStringSchema().serialize(42) == b"42"


def test_byte_array_schema_refuses_a_string():
    with pytest.raises(TypeError, match="ByteArraySchema writes bytes, got str"):
        ByteArraySchema().serialize("x")


def test_an_unknown_charset_is_refused_when_the_schema_is_made():
    with pytest.raises(ConfigurationError, match="unknown charset 'no-such-charset'"):
        SimpleStringSchema("no-such-charset")
    with pytest.raises(ConfigurationError, match="unknown charset"):
        Encoder.simple_string_encoder("no-such-charset")


@pytest.mark.parametrize(
    ("charset", "element", "line"),
    [
        ("UTF-8", "a line", b"a line\n"),
        ("UTF-16-LE", "a", b"a\x00\n\x00"),
        ("UTF-8", 7, b"7\n"),
    ],
)
def test_the_simple_string_encoder_writes_a_line_per_record(charset, element, line):
    assert Encoder.simple_string_encoder(charset).encode(element) == line
