"""The versioned envelope around every checkpoint and savepoint file.

A file is one envelope. Version 1 lays it out as (integers big-endian):

    offset  size  field
    0       4     magic b"BFLW"
    4       2     format version (uint16), 1
    6       2     kind length K (uint16)
    8       4     header length H (uint32)
    12      8     body length B (uint64)
    20      4     CRC-32 of kind, header and body (uint32)
    24      K     kind, UTF-8: what the file holds ("checkpoint-metadata", "subtask-state",
                  "keyed-state", "operator-state")
    24+K    H     header, msgpack: the schema'd description of the body (a dict for
                  every kind barrierflow writes, with its own "version" or "schema")
    24+K+H  B     body, opaque bytes described by the header

and nothing after it. The lengths make a truncated or padded file an error, and
the checksum a damaged one.

Versions. The magic and the version (the first 6 bytes) keep their place in
every version; everything after them belongs to the version. A reader accepts
every version from 1 up to its own `FORMAT_VERSION`, decoding an older layout
into the current (header, body) pair, and refuses a newer one: a savepoint
written by a newer barrierflow is never misread. Bumping `FORMAT_VERSION`
therefore means keeping a decoder for every older version here. The header's
own "version"/"schema" field versions what the header and body mean for a kind,
and follows the same rule in the module that owns the kind.

Pickle never appears at this level; only the keyed-state body holds pickled user
values, described by its header.

>>> data = encode("example", {"answer": 42}, b"body")
>>> header, body = decode(data, "example")
>>> header, bytes(body)
({'answer': 42}, b'body')
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any
from zlib import crc32

import msgpack

from barrierflow.errors import StateRestoreError

MAGIC = b"BFLW"
FORMAT_VERSION = 1
"""The envelope layout this release writes; it reads 1 to FORMAT_VERSION."""

_VERSION = struct.Struct(">4sH")
_PREFIX_V1 = struct.Struct(">4sHHIQI")


def encode(kind: str, header: Any, body: bytes = b"") -> bytes:
    """Wrap a msgpack-able `header` and an opaque `body` into one envelope of `kind`."""
    return encode_parts(kind, header, (body,))


def encode_parts(kind: str, header: Any, body: Sequence[bytes]) -> bytes:
    """`encode` of a body given as consecutive parts: copied once, into the envelope.

    >>> encode_parts("example", {}, [b"bo", b"dy"]) == encode("example", {}, b"body")
    True
    """
    return b"".join(envelope_parts(kind, header, body))


def envelope_parts(kind: str, header: Any, body: Sequence[bytes]) -> list[bytes]:
    """The envelope of `kind` around `header` and the body `body` (consecutive parts), as
    the parts to write one after the other: a large state file is written without ever
    being copied whole (each copy holds the GIL, stalling the mailbox thread).

    >>> b"".join(envelope_parts("example", {}, [b"bo", b"dy"])) == encode("example", {}, b"body")
    True
    """
    kind_bytes = kind.encode()
    try:
        header_bytes = msgpack.packb(header, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as error:
        raise TypeError(f"the header of a {kind!r} file is not msgpack-able: {error}") from error
    checksum = crc32(header_bytes, crc32(kind_bytes))
    length = 0
    for part in body:
        checksum = crc32(part, checksum)
        length += len(part)
    prefix = _PREFIX_V1.pack(
        MAGIC, FORMAT_VERSION, len(kind_bytes), len(header_bytes), length, checksum
    )
    return [prefix, kind_bytes, header_bytes, *body]


def decode(data: bytes | bytearray | memoryview, expected_kind: str) -> tuple[Any, memoryview]:
    """The header and body of an envelope of `expected_kind`; the body is a view into `data`.

    Raises StateRestoreError, naming what was expected and what was found, for a
    wrong magic, kind or checksum, a version newer than this release reads, and a
    truncated or padded file.
    """
    view = memoryview(data).cast("B")
    if len(view) < _VERSION.size:
        raise StateRestoreError(
            f"not a barrierflow {expected_kind!r} file: {len(view)} bytes is shorter than "
            f"the {_VERSION.size}-byte start of an envelope"
        )
    magic, version = _VERSION.unpack_from(view)
    if magic != MAGIC:
        raise StateRestoreError(
            f"not a barrierflow {expected_kind!r} file: expected magic {MAGIC!r}, found {magic!r}"
        )
    if version == 1:
        return _decode_v1(view, expected_kind)
    raise StateRestoreError(
        f"the {expected_kind!r} file has envelope format version {version}; this barrierflow "
        f"reads versions 1 to {FORMAT_VERSION}"
        + (": it was written by a newer release" if version > FORMAT_VERSION else "")
    )


def _decode_v1(view: memoryview, expected_kind: str) -> tuple[Any, memoryview]:
    if len(view) < _PREFIX_V1.size:
        raise StateRestoreError(
            f"truncated {expected_kind!r} file: {len(view)} bytes, shorter than the "
            f"{_PREFIX_V1.size}-byte envelope prefix"
        )
    _, _, kind_len, header_len, body_len, checksum = _PREFIX_V1.unpack_from(view)
    kind_end = _PREFIX_V1.size + kind_len
    header_end = kind_end + header_len
    body_end = header_end + body_len
    if len(view) != body_end:
        problem = "truncated" if len(view) < body_end else "padded"
        raise StateRestoreError(
            f"{problem} {expected_kind!r} file: its envelope declares {body_end} bytes, "
            f"found {len(view)}"
        )
    kind_view = view[_PREFIX_V1.size : kind_end]
    header_view = view[kind_end:header_end]
    body = view[header_end:body_end]
    kind = bytes(kind_view).decode(errors="replace")
    if kind != expected_kind:
        raise StateRestoreError(f"expected a {expected_kind!r} file, found a {kind!r} file")
    found = crc32(body, crc32(header_view, crc32(kind_view)))
    if found != checksum:
        raise StateRestoreError(
            f"damaged {expected_kind!r} file: checksum {found:#010x}, expected {checksum:#010x}"
        )
    try:
        header = msgpack.unpackb(header_view, raw=False, strict_map_key=False)
    except Exception as error:
        raise StateRestoreError(
            f"the header of the {expected_kind!r} file cannot be read: {error}"
        ) from error
    return header, body
