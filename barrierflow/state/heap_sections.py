"""One key group's section of a heap snapshot: pickled (canonical) or marshalled (checkpoints).

A section holds, per state of its header, a dict of user key -> value. Savepoints keep
the canonical encoding, a pickle (protocol 5) of the list of dicts
(`docs/savepoint-format.md` §4), written frame by frame so the writing thread lets the
mailbox thread have the GIL between 64 KiB frames. Checkpoints (and the heap changelog's
bases and deltas) take the cheaper encoding when every key and value is of a builtin
type marshal writes exactly (int, float, str, bytes, bool, None, tuple, list, dict,
set, frozenset; never a subclass, which marshal refuses), unless a value is a set:
`marshal` runs in C with no per-object call, faster than pickle for strings and tuples
(str -> int entries: 0.58 against 0.99 ms per 8 192; a q19-like int -> list of tuples:
10 against 47 ms), slower for plain ints (0.92 against 0.43 ms) and far slower for sets,
whose items it sorts; the writing thread is the one that competes with records for the
GIL. Its layout is

    0x01 | (4-byte big-endian length | marshal of (state index, {key: value}))...

with each state's dict cut into chunks of `MARSHAL_CHUNK` entries (each chunk one C
call holding the GIL about a millisecond). A pickle starts with 0x80 (its PROTO
opcode), so the first byte tells them apart. A section with any other object falls back
to the pickle. marshal's format is CPython's own (version 4 since 3.4), so these
sections are for checkpoints, which are read by the same installation, never for
savepoints.

>>> section = encode_section(["count"], [{"a": 1, ("b", 2): [3.5]}], fast=True)
>>> section[0], decode_section(section, 1)
(1, [{'a': 1, ('b', 2): [3.5]}])
>>> decode_section(encode_section(["count"], [{"a": object}], fast=True), 1)[0]["a"]
<class 'object'>
"""

from __future__ import annotations

import itertools
import marshal
import pickle
import struct
from typing import Any

from barrierflow.errors import ConfigurationError
from barrierflow.state.heap_copies import SET_TYPES

MARSHAL_TAG = 0x01
"""First byte of a marshalled section (a pickle's is 0x80)."""

MARSHAL_WHOLE_TAG = 0x02
"""First byte of a section marshalled in one piece (a changelog delta's key group)."""

MARSHAL_CHUNK = 8192
"""Entries per marshal call: bounds how long the writing thread holds the GIL at once."""

_LENGTH = struct.Struct(">I")


class _Frames:
    """A pickle's output gathered frame by frame through a Python-level `write`.

    `pickle.dumps` runs in C and keeps the GIL until it is done: pickling a large key
    group would stall the mailbox thread that long. A Pickler writing to this calls
    `write` once per 64 KiB frame, and each Python call lets a waiting thread have the
    GIL (after `sys.getswitchinterval()`).
    """

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: Any) -> None:
        self.parts.append(bytes(data))


def encode_section(names: list[str], per_state: list[dict[Any, Any]], fast: bool) -> bytes:
    """One key group's section: marshalled if `fast` and every object allows it, else
    pickled (ConfigurationError naming the state and key of a value that cannot be)."""
    if fast:
        marshalled = _marshal_section(per_state)
        if marshalled is not None:
            return marshalled
    frames = _Frames()
    try:
        pickle.Pickler(frames, protocol=5).dump(per_state)
    except Exception as error:
        raise pickle_error(names, per_state, error) from error
    return b"".join(frames.parts)


def _marshal_section(per_state: list[dict[Any, Any]]) -> bytes | None:
    """The marshalled section, or None if some key or value is not a plain builtin or a
    value is a set (`_holds_sets`)."""
    parts = [bytes((MARSHAL_TAG,))]
    pack = _LENGTH.pack
    try:
        for number, entries in enumerate(per_state):
            if not entries:
                continue
            if _holds_sets(entries.values()):
                return None
            for chunk in _chunks(entries):
                data = marshal.dumps((number, chunk), 4)
                parts.append(pack(len(data)))
                parts.append(data)
    except (ValueError, TypeError):  # an object marshal does not write (exactly)
        return None
    return b"".join(parts)


def encode_whole(names: list[str], per_state: list[Any], fast: bool) -> bytes:
    """A small section (a changelog delta's key group: per state `[keys, values]`, a map
    state's patches after them) in one piece: one marshal call if `fast` and every object
    allows it, else one pickle."""
    if fast and not any(_holds_sets(_change_values(change)) for change in per_state):
        try:
            return bytes((MARSHAL_WHOLE_TAG,)) + marshal.dumps(per_state, 4)
        except (ValueError, TypeError):
            pass
    try:
        return pickle.dumps(per_state, protocol=5)
    except Exception as error:
        raise pickle_error(names, [_as_dict(change) for change in per_state], error) from error


_SET_LOOK = 64
"""Values whose types `_holds_sets` looks at: a state's values are nearly always of one
type, and a look at every value costs a sixth of marshalling them."""


def _holds_sets(values: Any) -> bool:
    """Whether some of the first `_SET_LOOK` values are sets: marshal (CPython 3.11+) sorts
    a set's items to write it, 25x pickle's time for a set of 8 192 ints here, so such a
    key group is pickled. Sets nested deeper, or further on, are not looked for."""
    return not SET_TYPES.isdisjoint(set(map(type, itertools.islice(values, _SET_LOOK))))


def _change_values(change: list[Any]) -> Any:
    """The values of one state's change in a delta: its keys' and its patches'."""
    if len(change) == 2:
        return change[1]
    return itertools.chain(change[1], *(values for _, values, _ in change[3]))


def _as_dict(change: Any) -> dict[Any, Any]:
    """A delta's change as {key: value} (for naming what cannot be pickled; a patched
    map's entries under its key)."""
    entries = dict(zip(change[0], change[1], strict=True))
    if len(change) == 4:
        for key, (user_keys, values, _) in zip(change[2], change[3], strict=True):
            entries[key] = dict(zip(user_keys, values, strict=True))
    return entries


def _chunks(entries: dict[Any, Any]) -> Any:
    """`entries` in dicts of at most `MARSHAL_CHUNK` entries (itself if it is small)."""
    if len(entries) <= MARSHAL_CHUNK:
        return (entries,)
    items = iter(entries.items())
    return iter(lambda: dict(itertools.islice(items, MARSHAL_CHUNK)), {})


def decode_section(data: bytes | memoryview, states: int) -> Any:
    """What a section holds (any of the encodings): for a key group of a snapshot, one
    dict per state. Raises what unpickling or unmarshalling raises, or ValueError for a
    marshalled section that does not hold `states` states (the caller names the key
    group)."""
    view = memoryview(data)
    if view and view[0] == MARSHAL_WHOLE_TAG:
        return marshal.loads(view[1:])
    if not view or view[0] != MARSHAL_TAG:
        return pickle.loads(view)
    per_state: list[dict[Any, Any]] = [{} for _ in range(states)]
    position, end = 1, len(view)
    unpack = _LENGTH.unpack_from
    while position < end:
        (length,) = unpack(view, position)
        position += 4
        if position + length > end:
            raise ValueError(f"a marshalled chunk of {length} bytes runs past the section's end")
        number, chunk = marshal.loads(view[position : position + length])
        position += length
        if not isinstance(chunk, dict) or not 0 <= number < states:
            raise ValueError(f"a marshalled chunk names state {number!r} of {states}")
        per_state[number].update(chunk)
    return per_state


def pickle_error(
    names: list[str], per_state: list[dict[Any, Any]], error: Exception
) -> ConfigurationError:
    """The one-line error for a key group that cannot be pickled: which state and key."""
    for name, entries in zip(names, per_state, strict=True):
        for key, value in entries.items():
            for what, thing in (("key", key), ("value", value)):
                try:
                    pickle.dumps(thing, protocol=5)
                except Exception:
                    return ConfigurationError(
                        f"the {what} of state {name!r} for key {key!r:.200} cannot be "
                        f"pickled, so it cannot be checkpointed: {error}"
                    )
    return ConfigurationError(f"keyed state cannot be pickled: {error}")
