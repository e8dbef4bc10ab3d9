"""Operator state (source positions, sink transactions) as msgpack in the versioned envelope.

Operator state is small, plain data, so it is stored as msgpack in the header of
an "operator-state" envelope (`barrierflow._envelope`), never pickled.
A value round-trips exactly when it is built from:

- None, bool, int (64-bit), float, str, bytes;
- lists and dicts of these, nested; dict keys must be str, int, float, bool,
  None or bytes.

Tuples are accepted but come back as lists (msgpack has one array type), and
bytearray and memoryview come back as bytes. Anything else (sets, tuple dict
keys, objects, ints beyond 64 bits) is refused with a TypeError when the
snapshot is taken, rather than making a checkpoint that cannot be restored.

>>> decode_operator_state(encode_operator_state({"split-0": 120, 3: (1, b"x")}))
{'split-0': 120, 3: [1, b'x']}
"""

from __future__ import annotations

from typing import Any

from barrierflow import _envelope as state_format
from barrierflow.errors import StateRestoreError

OPERATOR_STATE = "operator-state"
"""Envelope kind of one operator's operator state."""

OPERATOR_STATE_VERSION = 1
"""Schema of the header: {"version": 1, "state": <the value>}. Readers take 1 up to this."""

_SCALARS = (type(None), bool, int, float, str, bytes, bytearray, memoryview)
_KEYS = (type(None), bool, int, float, str, bytes)
_INT_RANGE = (-(2**63), 2**64 - 1)


def encode_operator_state(value: Any) -> bytes:
    """`value` as an operator-state envelope; TypeError names what cannot be stored."""
    _check(value, "state")
    return state_format.encode(OPERATOR_STATE, {"version": OPERATOR_STATE_VERSION, "state": value})


def decode_operator_state(data: bytes | bytearray | memoryview) -> Any:
    """The value `encode_operator_state` stored (tuples come back as lists)."""
    header, _ = state_format.decode(data, OPERATOR_STATE)
    if not isinstance(header, dict) or "version" not in header or "state" not in header:
        raise StateRestoreError(
            f"an operator-state header must hold 'version' and 'state', found {header!r:.200}"
        )
    version = header["version"]
    if not isinstance(version, int) or not 1 <= version <= OPERATOR_STATE_VERSION:
        raise StateRestoreError(
            f"operator state has version {version!r}; this barrierflow reads versions 1 to "
            f"{OPERATOR_STATE_VERSION}"
        )
    return header["state"]


def _check(value: Any, path: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, _KEYS):
                raise TypeError(
                    f"operator state key {key!r} at {path} is a {type(key).__name__}; "
                    "dict keys must be str, int, float, bool, None or bytes"
                )
            _check(key, path)
            _check(item, f"{path}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
    elif not isinstance(value, _SCALARS):
        raise TypeError(
            f"operator state at {path} is a {type(value).__name__}; it must be msgpack-able: "
            "None, bool, int, float, str, bytes, or lists and dicts of these"
        )
    elif isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise TypeError(f"operator state at {path} is an int beyond 64 bits: {value}")
