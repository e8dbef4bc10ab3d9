"""Copies of the values a heap snapshot holds: what a handle hands out instead of the value.

While a snapshot holds a key group, a mutable value read from it is copied once so that a
change in place never reaches the snapshot (`heap_tables.SharedGroup`). The copy must share
nothing mutable with the value and be what a restore would give. It is on the record path
at the first access after each barrier, so it costs what the state's shape allows:

- a list, dict or set of numbers, strings and other immutable values (a list or map
  state's usual contents) of some size is copied by one C-level `copy()`, after a C-level
  look at its items' types;
- an object whose class has `__deepcopy__` (Python's copy protocol) copies itself: a
  mutable accumulator that knows its shape copies far faster than a round trip;
- anything else takes a marshal round trip (C, keeps shared references and cycles) if
  marshal writes it, else a pickle round trip; a list, dict or set holding sets goes
  straight to pickle; a value that cannot be pickled is handed out as it is (its
  snapshot's write fails on it, naming state and key).

Not marshal for sets: marshal (CPython 3.11+) sorts a set's items to write them
deterministically; a round trip of a set of 8 192 ints took 12.7 ms here against 1.2 ms by
pickle and 0.2 ms by `set.copy()`. Nor a level-by-level copy in Python for nested values:
it was 8x slower than marshal on a dict of 2 000 small lists.

>>> value = [1, {2, 3}, {"k": [4]}]
>>> copied = copy_value(value)
>>> copied == value, copied[1] is value[1], copied[2]["k"] is value[2]["k"]
(True, False, False)
>>> shared = [9]
>>> pair = copy_value([shared, shared])
>>> pair[0] is pair[1] and pair[0] is not shared
True
"""

from __future__ import annotations

import datetime
import decimal
import marshal
import pickle
from typing import Any

from barrierflow.core.windows.window import CountWindow, GlobalWindow, TimeWindow

__all__ = ["IMMUTABLE_TYPES", "SET_TYPES", "copy_value", "is_immutable"]

IMMUTABLE_TYPES = frozenset(
    {
        int,
        float,
        complex,
        bool,
        str,
        bytes,
        type(None),
        decimal.Decimal,
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        TimeWindow,  # windows: frozen, keys and values of window operators' state
        CountWindow,
        GlobalWindow,
    }
)
"""Types of values that cannot change in place: handed out as they are, never copied."""

_TUPLE_KINDS: dict[type, bool] = {tuple: True}
"""Per tuple type seen, whether its instances are plain tuples (no instance dict, as a
named tuple's): immutable when their items are."""


def is_immutable(value: Any) -> bool:
    """Whether `value` cannot change in place: an `IMMUTABLE_TYPES` type, or a tuple (or named
    tuple) of such values, at any depth."""
    kind = type(value)
    if kind in IMMUTABLE_TYPES:
        return True
    plain = _TUPLE_KINDS.get(kind)
    if plain is None:
        plain = _TUPLE_KINDS[kind] = issubclass(kind, tuple) and kind.__dictoffset__ == 0
    if not plain:
        return False
    for item in value:  # noqa: SIM110 (a loop: no generator per read, the hot path)
        if type(item) not in IMMUTABLE_TYPES and not is_immutable(item):
            return False
    return True


SET_TYPES = frozenset({set, frozenset})
"""What marshal (CPython 3.11+) writes by sorting the items: a copy or a checkpoint section
holding these goes to pickle."""

_LOOK_FROM = 32
"""Items from which a container's item types are looked at: below, marshal's round trip is
faster than the look (a set of a few items costs marshal little to sort)."""


def copy_value(value: Any) -> Any:
    """A copy of `value` sharing nothing mutable with it (see the module's docstring)."""
    kind = type(value)
    if kind is list or kind is dict or kind is set:
        if len(value) >= _LOOK_FROM:
            kinds = set(map(type, value))  # a dict's keys
            if kind is dict:
                kinds.update(map(type, value.values()))
            if kinds <= IMMUTABLE_TYPES:
                return value.copy()
            if kinds & SET_TYPES:  # marshal would sort them
                return _pickled_copy(value)
    elif kind is not tuple:
        deep_copy = getattr(kind, "__deepcopy__", None)
        if deep_copy is not None:
            return deep_copy(value, {})
    try:
        return marshal.loads(marshal.dumps(value, 4))
    except (ValueError, TypeError):
        return _pickled_copy(value)


def _pickled_copy(value: Any) -> Any:
    try:
        return pickle.loads(pickle.dumps(value, protocol=5))
    except Exception:
        return value
