"""The checkpoint file envelope: versioned, typed, and every damage is a StateRestoreError."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from barrierflow import _envelope as state_format
from barrierflow._envelope import FORMAT_VERSION, MAGIC, decode, encode
from barrierflow.errors import StateRestoreError

EXAMPLE = encode("subtask-state", {"operators": {"count": [0, 4]}, 7: "int key"}, b"body")


def test_an_envelope_round_trips_its_header_and_body():
    header, body = decode(EXAMPLE, "subtask-state")
    assert header == {"operators": {"count": [0, 4]}, 7: "int key"}
    assert isinstance(body, memoryview)
    assert bytes(body) == b"body"


def test_the_body_defaults_to_empty():
    header, body = decode(
        encode("checkpoint-metadata", {"checkpoint_id": 3}), "checkpoint-metadata"
    )
    assert header == {"checkpoint_id": 3}
    assert bytes(body) == b""


def test_decode_accepts_bytearray_and_memoryview():
    for data in (bytearray(EXAMPLE), memoryview(EXAMPLE)):
        header, body = decode(data, "subtask-state")
        assert header[7] == "int key"
        assert bytes(body) == b"body"


def test_version_1_layout_is_pinned_byte_for_byte():
    # magic, version 1, kind length 1, header length 1, body length 2, crc32, kind, header, body
    data = encode("k", None, b"xy")
    assert data[:12] == b"BFLW" + b"\x00\x01" + b"\x00\x01" + b"\x00\x00\x00\x01"
    assert data[12:20] == b"\x00" * 7 + b"\x02"
    assert data[24:] == b"k" + b"\xc0" + b"xy"
    assert len(data) == 28
    assert MAGIC == b"BFLW" and FORMAT_VERSION == 1


def test_a_header_that_msgpack_cannot_encode_is_a_type_error_naming_the_kind():
    with pytest.raises(TypeError, match="'keyed-state'"):
        encode("keyed-state", {"bad": {1, 2}})


def test_wrong_magic_names_the_expected_and_found_magic():
    with pytest.raises(StateRestoreError, match=r"expected magic b'BFLW', found b'PK\\x03\\x04'"):
        decode(b"PK\x03\x04" + EXAMPLE[4:], "subtask-state")


def test_a_file_of_another_kind_is_refused_naming_both_kinds():
    with pytest.raises(
        StateRestoreError, match="expected a 'keyed-state' file, found a 'subtask-state' file"
    ):
        decode(EXAMPLE, "keyed-state")


def with_version(data: bytes, version: int) -> bytes:
    return data[:4] + struct.pack(">H", version) + data[6:]


def test_a_newer_format_version_is_refused_as_written_by_a_newer_release():
    with pytest.raises(StateRestoreError, match=r"version 2.*reads versions 1 to 1.*newer release"):
        decode(with_version(EXAMPLE, FORMAT_VERSION + 1), "subtask-state")


def test_version_0_does_not_exist_and_is_refused():
    with pytest.raises(StateRestoreError, match="version 0"):
        decode(with_version(EXAMPLE, 0), "subtask-state")


def test_a_truncated_file_is_reported_with_declared_and_found_sizes():
    with pytest.raises(
        StateRestoreError, match=f"truncated 'subtask-state' file.*{len(EXAMPLE)} bytes, found 30"
    ):
        decode(EXAMPLE[:30], "subtask-state")


def test_a_padded_file_is_refused():
    with pytest.raises(StateRestoreError, match="padded"):
        decode(EXAMPLE + b"\x00", "subtask-state")


def test_a_damaged_body_fails_the_checksum():
    damaged = EXAMPLE[:-1] + b"X"
    with pytest.raises(StateRestoreError, match="damaged 'subtask-state' file: checksum"):
        decode(damaged, "subtask-state")


@given(st.data())
def test_every_prefix_of_an_envelope_is_a_state_restore_error(data):
    length = data.draw(st.integers(0, len(EXAMPLE) - 1))
    with pytest.raises(StateRestoreError):
        decode(EXAMPLE[:length], "subtask-state")


@given(st.integers(0, len(EXAMPLE) - 1), st.integers(1, 255))
def test_every_single_byte_change_is_a_state_restore_error(position, flip):
    damaged = bytearray(EXAMPLE)
    damaged[position] ^= flip
    with pytest.raises(StateRestoreError):
        decode(bytes(damaged), "subtask-state")


headers = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text() | st.binary(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text() | st.integers(-(2**63), 2**63 - 1), children, max_size=4)
    ),
    max_leaves=15,
)


@given(st.text(min_size=1, max_size=40), headers, st.binary(max_size=200))
def test_any_msgpack_header_and_body_round_trip(kind, header, body):
    found_header, found_body = state_format.decode(state_format.encode(kind, header, body), kind)
    assert found_header == header
    assert bytes(found_body) == body
