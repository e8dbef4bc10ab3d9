"""barrierflow.serialization: PyFlink's schemas (pyflink.common.serialization) in plain Python."""

from __future__ import annotations

import pytest

from barrierflow import Row, Types
from barrierflow.errors import ConfigurationError
from barrierflow.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    JsonRowDeserializationSchema,
    JsonRowSerializationSchema,
    RowFieldExtractorSchema,
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


# -- JSON rows (PyFlink's pyflink.datastream.formats.json) ---------------------------------


WORDS = Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])
NESTED = Types.ROW_NAMED(
    ["id", "owner"], [Types.INT(), Types.ROW_NAMED(["name"], [Types.STRING()])]
)


@pytest.mark.parametrize(
    ("type_info", "element", "message"),
    [
        (WORDS, ("a", 1), b'{"word":"a","count":1}'),
        (WORDS, Row(count=2, word="b"), b'{"word":"b","count":2}'),
        (WORDS, {"word": "c", "count": None}, b'{"word":"c","count":null}'),
        (WORDS, ("é", 3), '{"word":"é","count":3}'.encode()),
        (NESTED, (7, ("ann",)), b'{"id":7,"owner":{"name":"ann"}}'),
    ],
)
def test_json_row_serialization_writes_an_object_by_field_name(type_info, element, message):
    schema = JsonRowSerializationSchema.builder().with_type_info(type_info).build()
    assert schema.serialize(element) == message


@pytest.mark.parametrize(
    ("type_info", "message", "row"),
    [
        (WORDS, b'{"count": 1, "word": "a"}', Row(word="a", count=1)),
        (WORDS, b'{"word": "a"}', Row(word="a", count=None)),
        (WORDS, b'{"word": "a", "count": 1, "extra": true}', Row(word="a", count=1)),
        (NESTED, b'{"id": 7, "owner": {"name": "ann"}}', Row(id=7, owner=Row(name="ann"))),
    ],
)
def test_json_row_deserialization_reads_named_rows(type_info, message, row):
    schema = JsonRowDeserializationSchema.builder().type_info(type_info).build()
    assert schema.deserialize(message) == row


def test_json_row_deserialization_on_missing_fields_and_bad_messages():
    strict = JsonRowDeserializationSchema.builder().type_info(WORDS).fail_on_missing_field().build()
    with pytest.raises(ValueError, match=r"lacks the fields \['count'\]"):
        strict.deserialize(b'{"word": "a"}')
    plain = JsonRowDeserializationSchema.builder().type_info(WORDS).build()
    with pytest.raises(ValueError):
        plain.deserialize(b"not json")
    with pytest.raises(ValueError, match="not a JSON object"):
        plain.deserialize(b"[1, 2]")
    lenient = JsonRowDeserializationSchema.builder().type_info(WORDS).ignore_parse_errors().build()
    assert lenient.deserialize(b"not json") is None


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: JsonRowSerializationSchema.builder().build(), "needs a row type"),
        (
            lambda: JsonRowSerializationSchema.builder().with_type_info(Types.STRING()).build(),
            "needs a row type \\(Types.ROW_NAMED\\), got String",
        ),
        (lambda: JsonRowDeserializationSchema.builder().build(), "needs a row type"),
        (
            lambda: JsonRowDeserializationSchema.builder().json_schema("{}"),
            "a JSON schema string is not supported",
        ),
    ],
)
def test_a_json_schema_without_a_row_type_is_refused_with_one_line(build, message):
    with pytest.raises(ConfigurationError, match=message):
        build()


def test_row_field_extractor_takes_one_bytes_field():
    assert RowFieldExtractorSchema(0).serialize(Row(b"k", b"v")) == b"k"
    assert RowFieldExtractorSchema(1).serialize((b"k", bytearray(b"v"))) == b"v"
    with pytest.raises(TypeError, match="field 0 is str, not bytes"):
        RowFieldExtractorSchema(0).serialize(Row("k"))
    with pytest.raises(ConfigurationError, match="field index >= 0, got -1"):
        RowFieldExtractorSchema(-1)
