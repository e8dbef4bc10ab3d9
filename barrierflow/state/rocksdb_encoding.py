"""Bytes for the on-disk backend: its RocksDB key layout and the encoding of keys and values.

A RocksDB key is

    key group (2 bytes, big-endian) | state id (2 bytes, big-endian) | user key | [map key]

where the user key is length-prefixed (`key_part`), so no encoded user key is a prefix of
another and a map state's entries of one user key are one contiguous range. The key group
comes first, so a key-group range of every state is one contiguous range of keys (a
restore clips with `delete_range`, a canonical snapshot is one ordered scan). The state id
is the state's position in the backend's list of state names.

Keys must give equal bytes for keys a Python dict takes as equal: exact `int`, `bool` and
integral `float` encode as the same int (`1 == 1.0 == True`), `str`, `bytes`, None and
tuples of these natively; anything else is pickled (protocol 5), which is only equal for
equal objects that pickle to equal bytes (true for plain value classes; not for objects
holding sets of str, nor for `int`/`str` subclasses such as enums, which therefore differ
from the plain value they equal). Keys read back come back as the natively encoded value:
`True` or `1.0` stored as a key reads back as `1`.

Values round-trip exactly: exact `int`, `bool`, `float`, `str`, `bytes` and None have a
compact encoding, anything else is pickled (protocol 5). A list state's value is its
elements' encodings, each behind a 4-byte length, so `add` appends bytes without
decoding the list.

>>> decode_key(encode_key(("alice", 7))), decode_key(encode_key(True))
(('alice', 7), 1)
>>> encode_key(1) == encode_key(1.0) == encode_key(True)
True
>>> all(key_part(k) == _length(len(encode_key(k))) + encode_key(k) for k in ("a" * 126, "é", 7))
True
>>> decode_value(encode_value(2.5)), decode_list(encode_list(["a", 1]) + encode_element(None))
(2.5, ['a', 1, None])
"""

from __future__ import annotations

import math
import pickle
import struct
from collections.abc import Iterable
from typing import Any

from barrierflow.errors import StateRestoreError

# Tags: the first byte of an encoded key or value.
_NONE = 0x00
_INT = 0x01  # 8 bytes, signed big-endian
_BIG_INT = 0x02  # any length, signed big-endian (ints outside int64)
_FLOAT = 0x03  # 8 bytes IEEE 754
_STR = 0x04  # UTF-8 (lone surrogates kept)
_BYTES = 0x05
_TUPLE = 0x06  # keys only: each element behind its length (`_length`)
_FALSE = 0x07  # values only (keys encode bools as ints)
_TRUE = 0x08
_PICKLE = 0x7F  # protocol 5

_Q = struct.Struct(">q")
_D = struct.Struct(">d")
_I = struct.Struct(">I")
_H = struct.Struct(">H")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

NATIVE_KIND = "rocksdb-keyed-state"
"""Envelope kind of a checkpoint's native RocksDB section (`rocksdb_backend.py`)."""

KEY_GROUP_BYTES = 2
STATE_ID_BYTES = 2
PREFIX_BYTES = KEY_GROUP_BYTES + STATE_ID_BYTES
MAX_KEY_GROUPS = 1 << 15
"""Flink's upper bound of the max parallelism; key groups fit the 2-byte prefix."""


def key_group_prefix(key_group: int) -> bytes:
    """The first bytes of every RocksDB key of `key_group` (the start of its range)."""
    return _H.pack(key_group)


def state_prefix(key_group: int, state_id: int) -> bytes:
    """The first bytes of every RocksDB key of one state in one key group."""
    return _H.pack(key_group) + _H.pack(state_id)


def split_prefix(db_key: bytes) -> tuple[int, int]:
    """(key group, state id) of a RocksDB key."""
    return _H.unpack_from(db_key)[0], _H.unpack_from(db_key, KEY_GROUP_BYTES)[0]


def section_kind(section: bytes | memoryview) -> str:
    """The kind an envelope names ("keyed-state", NATIVE_KIND, ...), read before it is
    decoded (which checks everything); "" if it is too short to name one."""
    view = memoryview(section).cast("B")
    if len(view) < 24:
        return ""
    (kind_length,) = _H.unpack_from(view, 6)
    return bytes(view[24 : 24 + kind_length]).decode(errors="replace")


# ---- keys ---------------------------------------------------------------------------------


def encode_key(key: Any) -> bytes:
    """Deterministic bytes of a user key or map key, equal for keys a dict takes as equal.
    Raises TypeError for an unhashable key and PicklingError for an unpicklable one."""
    cls = type(key)
    if cls is str:
        return b"\x04" + key.encode("utf-8", "surrogatepass")
    if cls is int or cls is bool:
        return _encode_int(key)
    if cls is tuple:
        parts = [b"\x06"]
        for item in key:
            encoded = encode_key(item)
            parts.append(_length(len(encoded)))
            parts.append(encoded)
        return b"".join(parts)
    if cls is bytes:
        return b"\x05" + key
    if key is None:
        return b"\x00"
    if cls is float:
        if key.is_integer():
            return _encode_int(int(key))
        return b"\x03" + _D.pack(math.nan if key != key else key)
    hash(key)  # a dict refuses unhashable keys: so does this backend (TypeError)
    try:
        return b"\x7f" + pickle.dumps(key, protocol=5)
    except Exception as error:
        raise pickle.PicklingError(
            f"{type(key).__qualname__} cannot be pickled: {error}"
        ) from error


def _encode_int(value: int) -> bytes:
    if _INT64_MIN <= value <= _INT64_MAX:
        return b"\x01" + _Q.pack(value)
    return b"\x02" + value.to_bytes((value.bit_length() + 8) // 8, "big", signed=True)


def _length(n: int) -> bytes:
    """A length in 1 byte below 128, else 4 bytes with the top bit set (prefix-free)."""
    return bytes((n,)) if n < 0x80 else _I.pack(n | 0x80000000)


def _read_length(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """(length, position after it) of a `_length` at `at`."""
    first = data[at]
    if first < 0x80:
        return first, at + 1
    return _I.unpack_from(data, at)[0] & 0x7FFFFFFF, at + 4


_STR_HEADS = [bytes((n, _STR)) for n in range(0x80)]
"""`_length(n)` and the str tag, for str keys of up to 126 encoded bytes (the hot path)."""
_INT_HEAD = bytes((9, _INT))


def key_part(key: Any) -> bytes:
    """The user key as it sits in a RocksDB key: its encoding behind its length."""
    cls = type(key)
    if cls is str:
        data = key.encode("utf-8", "surrogatepass")
        if len(data) < 0x7F:
            return _STR_HEADS[len(data) + 1] + data
    elif cls is int and _INT64_MIN <= key <= _INT64_MAX:
        return _INT_HEAD + _Q.pack(key)
    encoded = encode_key(key)
    return _length(len(encoded)) + encoded


def split_key_part(db_key: bytes, at: int = PREFIX_BYTES) -> tuple[bytes, int]:
    """(encoded user key, position after it) of the user key starting at `at`."""
    length, start = _read_length(db_key, at)
    end = start + length
    if end > len(db_key):
        raise StateRestoreError(f"a RocksDB key is cut short: {db_key[:64]!r}")
    return db_key[start:end], end


def decode_key(data: bytes | memoryview) -> Any:
    """The key `encode_key` encoded (an int for a bool or integral float)."""
    tag = data[0]
    if tag == _STR:
        return bytes(data[1:]).decode("utf-8", "surrogatepass")
    if tag == _INT:
        return _Q.unpack_from(data, 1)[0]
    if tag == _TUPLE:
        items = []
        at, end = 1, len(data)
        while at < end:
            length, at = _read_length(data, at)
            items.append(decode_key(data[at : at + length]))
            at += length
        return tuple(items)
    return _decode_rest(data, tag)


def _decode_rest(data: bytes | memoryview, tag: int) -> Any:
    if tag == _BYTES:
        return bytes(data[1:])
    if tag == _NONE:
        return None
    if tag == _FLOAT:
        return _D.unpack_from(data, 1)[0]
    if tag == _BIG_INT:
        return int.from_bytes(data[1:], "big", signed=True)
    if tag == _FALSE:
        return False
    if tag == _TRUE:
        return True
    if tag == _PICKLE:
        return pickle.loads(data[1:])
    raise StateRestoreError(f"unknown tag {tag:#04x} in RocksDB state: the data is damaged")


# ---- values ---------------------------------------------------------------------------------


def encode_value(value: Any) -> bytes:
    """Compact bytes of a value; anything but exact int, bool, float, str, bytes and None is
    pickled (pickle's errors propagate: the caller names the state and key)."""
    cls = type(value)
    if cls is int:
        if _INT64_MIN <= value <= _INT64_MAX:
            return b"\x01" + _Q.pack(value)
        return _encode_int(value)
    if cls is str:
        return b"\x04" + value.encode("utf-8", "surrogatepass")
    if cls is float:
        return b"\x03" + _D.pack(value)
    if cls is bytes:
        return b"\x05" + value
    if cls is bool:
        return b"\x08" if value else b"\x07"
    if value is None:
        return b"\x00"
    return b"\x7f" + pickle.dumps(value, protocol=5)


def decode_value(data: bytes | memoryview) -> Any:
    """The value `encode_value` encoded."""
    tag = data[0]
    if tag == _INT:
        return _Q.unpack_from(data, 1)[0]
    if tag == _STR:
        return bytes(data[1:]).decode("utf-8", "surrogatepass")
    return _decode_rest(data, tag)


def encode_element(value: Any) -> bytes:
    """One list element as a list state stores it: its encoding behind a 4-byte length."""
    encoded = encode_value(value)
    return _I.pack(len(encoded)) + encoded


def encode_list(values: Iterable[Any]) -> bytes:
    """A list state's stored value."""
    return b"".join(encode_element(value) for value in values)


def decode_list(data: bytes) -> list[Any]:
    """The elements of a list state's stored value."""
    view = memoryview(data)
    items = []
    at, end = 0, len(data)
    unpack = _I.unpack_from
    while at < end:
        length = unpack(view, at)[0]
        at += 4
        if at + length > end:
            raise StateRestoreError("a list state's value is cut short: the data is damaged")
        items.append(decode_value(view[at : at + length]))
        at += length
    return items
