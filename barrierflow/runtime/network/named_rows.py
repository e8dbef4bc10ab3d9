"""A data frame's pickled values, with a batch of one named tuple class sent as plain tuples.

Pickle writes a named tuple (`collections.namedtuple`, `typing.NamedTuple`) through its
`__reduce_ex__`, which calls the class's Python-level `__getnewargs__` for every record,
and reads it back through the class's Python-level `__new__`: for a batch of 2 000
Nexmark bids here, 3.2 ms to pickle and 1.5-2.0 ms to unpickle, against 0.8 and 1.2 ms
for the same values as plain tuples with the class named once (best of 300 runs). So a
batch whose values are all of one plain named tuple class is pickled as `(class,
tuples)` under a reducer that unpickling turns back into the list of named tuples, with
C-level calls only (`tuple.__new__(class, fields)`, as the class's own `__new__` does).
The receiver's `pickle.loads` returns the list either way.

Plain: made by `collections.namedtuple` (as `typing.NamedTuple` classes are), with no
instance `__dict__`, no `__new__` of a subclass and no pickling hook of its own; any
other class, and a batch of mixed classes, is pickled as before.
"""

from __future__ import annotations

import collections
import copyreg
import functools
import pickle
from typing import Any

_NAMEDTUPLE_GETNEWARGS = collections.namedtuple("_Probe", "").__getnewargs__.__code__
"""The code of every `__getnewargs__` that `collections.namedtuple` makes (one function body)."""

_HOOKS = ("__reduce__", "__reduce_ex__", "__getstate__")

_plain: dict[type, bool] = {}
"""Per class seen: whether it is a plain named tuple (classes are few)."""


def pickle_values(values: list[Any]) -> bytes:
    """`values` pickled (protocol 5); `pickle.loads` gives back an equal list."""
    if values:
        kind = type(values[0])
        plain = _plain.get(kind)
        if plain is None:
            plain = _plain[kind] = _is_plain_named_tuple(kind)
        if plain and len(set(map(type, values))) == 1:  # C-level, unlike all(...)
            return pickle.dumps(_NamedRows(kind, list(map(tuple, values))), protocol=5)
    return pickle.dumps(values, protocol=5)


def rebuild(kind: type, rows: list[tuple[Any, ...]]) -> list[Any]:
    """The named tuples of `kind` whose fields are `rows` (what unpickling calls)."""
    return list(map(functools.partial(tuple.__new__, kind), rows))


class _NamedRows:
    """What is pickled for a batch of one plain named tuple class."""

    __slots__ = ("kind", "rows")

    def __init__(self, kind: type, rows: list[tuple[Any, ...]]) -> None:
        self.kind = kind
        self.rows = rows

    def __reduce__(self) -> tuple[Any, ...]:
        return rebuild, (self.kind, self.rows)


def _is_plain_named_tuple(kind: type) -> bool:
    """Whether unpickling `kind` by `rebuild` gives what its own pickling would: made by
    `collections.namedtuple`, no subclass `__new__`, no instance `__dict__`, no pickling
    hook of its own (nor one registered with copyreg)."""
    if not issubclass(kind, tuple) or kind.__dictoffset__ or kind in copyreg.dispatch_table:
        return False
    if any(getattr(kind, hook) is not getattr(object, hook) for hook in _HOOKS):
        return False
    for cls in kind.__mro__:
        getnewargs = cls.__dict__.get("__getnewargs__")
        if getnewargs is not None:  # the class namedtuple made (its __new__ is plain)
            return getattr(getnewargs, "__code__", None) is _NAMEDTUPLE_GETNEWARGS
        if "__new__" in cls.__dict__:
            return False
    return False
