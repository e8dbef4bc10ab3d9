"""Key groups: how keys map to subtasks so that keyed state can be rescaled.

This is Flink's `KeyGroupRangeAssignment`. Every key belongs to one of
`max_parallelism` key groups, fixed for the life of a job and its savepoints:

    key group = stable_hash(key) % max_parallelism

A subtask owns a contiguous range of key groups, so changing the parallelism
moves whole key groups between subtasks and never splits one:

    subtask   = key_group * parallelism // max_parallelism

`stable_hash` is part of the savepoint format: a key must land in the same key
group in every process, run and release, or restored state would sit in the
wrong subtask. Python's `hash()` is salted per process for str and bytes, so it
is never used. Changing `stable_hash` breaks every savepoint; the tests pin its
values.

>>> assign_to_key_group("alice", 128)
37
>>> key_group_range_for_subtask(128, 3, 0)
KeyGroupRange(start=0, end=42)
>>> subtask_for_key_group(128, 3, 37)
0
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import math
import numbers
import pickle
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from zlib import crc32

from barrierflow.errors import ConfigurationError

DEFAULT_MAX_PARALLELISM = 128
"""Key groups of a job unless `set_max_parallelism` says otherwise (Flink's lower default)."""

_M32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B97F4A7C15
"""2**64 / golden ratio: multiplying by it and keeping the high half mixes all input bits."""

# Seeds keep equal bytes of different types apart (crc32 continues from the seed).
_BYTES_SEED = 0x62797465
_INT_SEED = 0x696E7467
_FLOAT_SEED = 0x666C6F61
_TUPLE_SEED = 0x7475706C
_SET_SEED = 0x73657473
_ENUM_SEED = 0x656E756D
_DATACLASS_SEED = 0x64617461
_PICKLE_SEED = 0x7069636B
_NONE_HASH = 0x4E6F6E65
_FNV_PRIME = 0x01000193
_DOUBLE = struct.Struct("<d")
_PICKLE_PROTOCOL = 4
"""Pinned, so the fallback hash does not move when Python's default protocol changes."""


def _mix(h: int) -> int:
    """Fibonacci hashing: the high half of h * 2**64/phi, so low bits depend on every bit of h."""
    return (h * _GOLDEN >> 32) & _M32


def stable_hash(key: Any) -> int:
    """A 32-bit hash of `key` that is the same in every process, run and release.

    Keys that compare equal hash equal, as with `hash()`: `1`, `1.0`, `True` and
    `IntEnum` members with value 1 share a hash, a `StrEnum` member hashes as its
    string, `bytearray` as `bytes`, `set` as `frozenset`, a namedtuple as its tuple.

    - str: crc32 of its UTF-8 bytes, then a mixing step (see `_mix`).
    - int in [0, 2**32): mixed directly. Other ints of any size: crc32 of their
      shortest signed little-endian bytes, then mixed. `bool` is an int.
    - float: integral floats hash as the int; others as their IEEE 754 bytes
      (one canonical NaN). Fractions, Decimals and complex numbers with a zero
      imaginary part hash as the int or float they equal, when there is one.
    - bytes, bytearray, memoryview: crc32 of the bytes (seeded apart from str).
    - None: a constant.
    - tuple and list: the element hashes, combined in order.
    - frozenset and set: the element hashes, combined without order.
    - Enum members (other than int or str enums): the class's qualified name
      and the member's name, so a renamed member or class is a different key.
    - dataclass instances: the class's qualified name and the fields taking part
      in equality, hashed as above.
    - objects with `__index__` (numpy integers): hashed as that int.
    - Fallback, any other picklable object: crc32 of its pickle (protocol 4).
      This is only stable if equal objects pickle to equal bytes in every
      process: true for plain value classes, false for objects holding sets or
      dicts of str (their order depends on PYTHONHASHSEED) or whose `__eq__`
      ignores part of their state. Prefer a tuple of plain values as the key.

    An unpicklable key raises ConfigurationError naming its type.

    >>> stable_hash("alice"), stable_hash(7), stable_hash(7.0), stable_hash(True)
    (1712320549, 1401181202, 1401181202, 2654435769)
    >>> stable_hash(("alice", 7)) == stable_hash(["alice", 7])
    True
    """
    cls = type(key)
    if cls is str:
        return (crc32(key.encode()) * _GOLDEN >> 32) & _M32
    if cls is int:
        if 0 <= key <= _M32:
            return (key * _GOLDEN >> 32) & _M32
        return _hash_int(key)
    if cls is tuple:
        return _hash_sequence(key)
    return _slow_hash(key)


def _hash_int(value: int) -> int:
    if 0 <= value <= _M32:
        return _mix(value)
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return _mix(crc32(data, _INT_SEED))


def _hash_float(value: float) -> int:
    if value.is_integer():
        return _hash_int(int(value))
    if math.isnan(value):
        value = math.nan
    return _mix(crc32(_DOUBLE.pack(value), _FLOAT_SEED))


def _hash_number(value: Any) -> int | None:
    """Fractions, Decimals and complex numbers hash as the int or float they equal, if any."""
    if isinstance(value, complex):
        if value.imag != 0:
            return None
        value = value.real
    try:
        as_int = int(value)
        if as_int == value:
            return _hash_int(as_int)
        as_float = float(value)
    except (ValueError, OverflowError, TypeError):
        return None
    return _hash_float(as_float) if as_float == value else None


def _hash_sequence(items: tuple[Any, ...] | list[Any]) -> int:
    acc = _TUPLE_SEED ^ len(items)
    for item in items:
        acc = ((acc ^ stable_hash(item)) * _FNV_PRIME) & _M32
    return _mix(acc)


def _slow_hash(key: Any) -> int:
    """Every type but exact str, int and tuple (those are dispatched above)."""
    if isinstance(key, str):
        return _mix(crc32(key.encode()))
    if isinstance(key, int):
        return _hash_int(int(key))
    if isinstance(key, float):
        return _hash_float(float(key))
    if isinstance(key, bytes | bytearray | memoryview):
        return _mix(crc32(key, _BYTES_SEED))
    if key is None:
        return _NONE_HASH
    if isinstance(key, tuple | list):
        return _hash_sequence(key)
    if isinstance(key, frozenset | set):
        total = sum(map(stable_hash, key)) & _M32
        return _mix(_SET_SEED ^ total ^ (len(key) << 16))
    if isinstance(key, enum.Enum):
        name = f"{type(key).__qualname__}.{key.name}"
        return _mix(crc32(name.encode(), _ENUM_SEED))
    if dataclasses.is_dataclass(key) and not isinstance(key, type):
        fields = [getattr(key, f.name) for f in dataclasses.fields(key) if f.compare]
        name_hash = crc32(type(key).__qualname__.encode(), _DATACLASS_SEED)
        return _mix(name_hash ^ _hash_sequence(fields))
    if isinstance(key, numbers.Number | decimal.Decimal):
        hashed = _hash_number(key)
        if hashed is not None:
            return hashed
    elif hasattr(type(key), "__index__"):
        return _hash_int(key.__index__())
    return _hash_pickled(key)


def _hash_pickled(key: Any) -> int:
    try:
        data = pickle.dumps(key, protocol=_PICKLE_PROTOCOL)
    except Exception as error:
        raise ConfigurationError(
            f"a key of type {type(key).__module__}.{type(key).__qualname__} cannot be hashed "
            f"stably across processes (it cannot be pickled: {error}). Key by str, int, "
            "float, bytes, None, an enum, a dataclass or a tuple of these"
        ) from error
    return _mix(crc32(data, _PICKLE_SEED))


def compute_key_group_for_hash(key_hash: int, max_parallelism: int) -> int:
    """The key group of a `stable_hash` value (already mixed, so a plain modulo).

    >>> compute_key_group_for_hash(stable_hash("alice"), 128)
    37
    """
    return key_hash % max_parallelism


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    """The key group of `key`, in [0, max_parallelism).

    >>> assign_to_key_group("alice", 128), assign_to_key_group(7, 128)
    (37, 18)
    """
    return stable_hash(key) % max_parallelism


def assign_to_key_groups(keys: Iterable[Any], max_parallelism: int) -> list[int]:
    """The key group of every key, as `assign_to_key_group` gives it, in one loop.

    The common keys (str, and int in [0, 2**32)) are hashed inline: a partitioner routing
    a batch pays no function call per record for them.

    >>> assign_to_key_groups(["alice", 7, -7, ("alice", 7)], 128) == [
    ...     assign_to_key_group(k, 128) for k in ["alice", 7, -7, ("alice", 7)]
    ... ]
    True
    """
    groups = []
    append = groups.append
    for key in keys:
        cls = type(key)
        if cls is str:
            append(((crc32(key.encode()) * _GOLDEN >> 32) & _M32) % max_parallelism)
        elif cls is int and 0 <= key <= _M32:
            append(((key * _GOLDEN >> 32) & _M32) % max_parallelism)
        else:
            append(stable_hash(key) % max_parallelism)
    return groups


def subtask_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The subtask whose key-group range holds `key_group` (Flink's
    `computeOperatorIndexForKeyGroup`).

    >>> [subtask_for_key_group(128, 3, g) for g in (0, 42, 43, 85, 86, 127)]
    [0, 0, 1, 1, 2, 2]
    """
    return key_group * parallelism // max_parallelism


@dataclass(frozen=True)
class KeyGroupRange:
    """Key groups `start` to `end`, both INCLUSIVE as in Flink; `end == start - 1` is empty.

    >>> r = KeyGroupRange(0, 42)
    >>> len(r), 42 in r, 43 in r, len(r.intersection(KeyGroupRange(40, 60)))
    (43, True, False, 3)
    >>> KeyGroupRange(0, 3).intersection(KeyGroupRange(10, 20))
    KeyGroupRange(start=0, end=-1)
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start - 1:
            raise ConfigurationError(
                f"invalid key-group range [{self.start}, {self.end}]: need 0 <= start <= end + 1"
            )

    @classmethod
    def empty(cls) -> KeyGroupRange:
        """The range without key groups (Flink's EMPTY_KEY_GROUP_RANGE)."""
        return cls(0, -1)

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        """The key groups in both ranges (the empty range if none)."""
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange.empty()


def key_group_range_for_subtask(
    max_parallelism: int, parallelism: int, index: int
) -> KeyGroupRange:
    """The key groups subtask `index` of `parallelism` owns (Flink's
    `computeKeyGroupRangeForOperatorIndex`): start = ceil(index * maxP / p),
    end = ceil((index + 1) * maxP / p) - 1.

    >>> [key_group_range_for_subtask(128, 3, i) for i in range(3)]  # doctest: +NORMALIZE_WHITESPACE
    [KeyGroupRange(start=0, end=42), KeyGroupRange(start=43, end=85),
     KeyGroupRange(start=86, end=127)]
    """
    if not 0 < parallelism <= max_parallelism:
        raise ConfigurationError(
            f"parallelism {parallelism} must be between 1 and the max parallelism {max_parallelism}"
        )
    if not 0 <= index < parallelism:
        raise ConfigurationError(f"subtask index {index} is outside [0, {parallelism})")
    start = -(-index * max_parallelism // parallelism)
    end = -(-(index + 1) * max_parallelism // parallelism) - 1
    return KeyGroupRange(start, end)
