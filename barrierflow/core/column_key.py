"""ColumnKey: `key_by("auction")`, a key that is one column (or field) of the record.

A key selector given as a name. On Python rows it reads `row[name]` from a dict and the
attribute `name` of anything else (a NamedTuple, a dataclass); on columnar batches the
partitioner reads the Arrow column and hashes it vectorized, with exactly the key groups
the Python values get, so both paths agree on which subtask owns a key.

>>> key = ColumnKey("auction")
>>> key.get_key({"auction": 7, "price": 3}), key
(7, ColumnKey('auction'))
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import KeySelector

__all__ = ["ColumnKey"]


class ColumnKey(KeySelector):
    """The key of a record is its column `name` (picklable; equal when the names are)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a column key needs a column name, got {name!r}")
        self.name = name

    def get_key(self, value: Any) -> Any:
        try:
            return value[self.name] if type(value) is dict else getattr(value, self.name)
        except (KeyError, AttributeError):
            raise KeyError(
                f"key_by({self.name!r}): the record has no column {self.name!r}: {value!r:.200}"
            ) from None

    def __call__(self, value: Any) -> Any:
        return self.get_key(value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ColumnKey) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("ColumnKey", self.name))

    def __repr__(self) -> str:
        return f"ColumnKey({self.name!r})"
