"""`Row` and `RowKind`, PyFlink's record of positional or named fields with a change kind
(`pyflink.common.Row`), so a job that builds, reads and prints rows runs unchanged.

Fields are read by position (`row[0]`), by name (`row["name"]`, `row.name`) and
iterated; `Row(name=..., age=...)` keeps its keywords' order; `Row("name", "age")` is a
row *class* that makes named rows when called. Equality compares kind and values (named
rows by name), as PyFlink's does.

>>> row = Row(name="Alice", age=11)
>>> row
Row(name='Alice', age=11)
>>> row.name, row[1], row.as_dict()
('Alice', 11, {'name': 'Alice', 'age': 11})
>>> Person = Row("name", "age")
>>> Person("Bob", 3)
Row(name='Bob', age=3)
>>> Row.of_kind(RowKind.DELETE, "a", 1).get_row_kind()
<RowKind.DELETE: 3>
>>> print(RowKind.DELETE)
-D
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import Enum
from typing import Any

__all__ = ["Row", "RowKind"]


class RowKind(Enum):
    """What a row is in a changelog: an insert, the value before or after an update, a
    delete. `str()` is Flink's short string (`+I`, `-U`, `+U`, `-D`)."""

    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def __str__(self) -> str:
        return _SHORT[self.value]


_SHORT = ("+I", "-U", "+U", "-D")


def _make_row(fields: list[str] | None, values: tuple, kind: RowKind) -> Row:
    """Rebuilds a pickled Row (module level, so pickle finds it)."""
    row = Row(*values)
    if fields is not None:
        row._fields = list(fields)
    row._row_kind = kind
    return row


class Row:
    """A record of fields, positional or named, with a `RowKind`; see the module."""

    __slots__ = ("_fields", "_row_kind", "_values")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("a Row takes positional or named fields, not both")
        self._fields: list[str] | None = list(kwargs) if kwargs else None
        self._values: list[Any] = list(kwargs.values()) if kwargs else list(args)
        self._row_kind = RowKind.INSERT

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> Row:
        row = Row(*args, **kwargs)
        row._row_kind = row_kind
        return row

    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        self._row_kind = row_kind

    def set_field_names(self, field_names: list[str]) -> None:
        self._fields = list(field_names)

    def get_field_names(self) -> list[str] | None:
        """The field names, or None for a positional row (barrierflow's reader for them)."""
        return None if self._fields is None else list(self._fields)

    def get_fields_by_names(self, names: list[str]) -> list[Any]:
        if self._fields is None or names == self._fields:
            return list(self._values)
        missing = sorted(set(names) - set(self._fields))
        if missing:
            raise KeyError(f"field names {missing} are not in {self._fields}")
        return [self._values[self._fields.index(name)] for name in names]

    def as_dict(self, recursive: bool = False) -> dict[str, Any]:
        """The named fields as a dict; nested rows as dicts too when `recursive`."""
        if self._fields is None:
            raise TypeError("a Row without field names cannot be turned into a dict")
        if not recursive:
            return dict(zip(self._fields, self._values, strict=True))
        pairs = zip(self._fields, self._values, strict=True)
        return {name: _as_plain(value) for name, value in pairs}

    def __call__(self, *args: Any) -> Row:
        """A named row of this row class (`Row("name", "age")("Alice", 11)`)."""
        if len(args) > len(self._values):
            raise ValueError(
                f"the row class {self!r} has {len(self._values)} fields, got {len(args)} values"
            )
        return _make_row([str(name) for name in self._values], args, self._row_kind)

    def __getitem__(self, item: int | slice | str) -> Any:
        if isinstance(item, int | slice):
            return self._values[item]
        return self._values[self._index(item, KeyError)]

    def __setitem__(self, item: int | slice | str, value: Any) -> None:
        if isinstance(item, int | slice):
            self._values[item] = value
        else:
            self._values[self._index(item, KeyError)] = value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._values[self._index(name, AttributeError)]

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in Row.__slots__:
            raise AttributeError(f"a Row's fields are set by index or name: row[{name!r}] = ...")
        object.__setattr__(self, name, value)

    def _index(self, name: str, error: type[Exception]) -> int:
        if self._fields is None or name not in self._fields:
            raise error(name)
        return self._fields.index(name)

    def __contains__(self, item: Any) -> bool:
        return item in (self._fields if self._fields is not None else self._values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row) or self._row_kind != other._row_kind:
            return False
        if (self._fields is None) != (other._fields is None):
            return False
        if self._fields is None:
            return self._values == other._values
        return self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __reduce__(self) -> tuple:
        return _make_row, (self._fields, tuple(self._values), self._row_kind)

    def __repr__(self) -> str:
        if self._fields is None:
            return "<Row({})>".format(", ".join(repr(value) for value in self._values))
        pairs = zip(self._fields, self._values, strict=True)
        return "Row({})".format(", ".join(f"{name}={value!r}" for name, value in pairs))


def _as_plain(value: Any) -> Any:
    if isinstance(value, Row):
        return value.as_dict(True)
    if isinstance(value, list):
        return [_as_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _as_plain(item) for key, item in value.items()}
    return value
