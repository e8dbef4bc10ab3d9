"""The reduce function behind `KeyedStream.sum/min/max/min_by/max_by`, with PyFlink's
semantics.

`sum`, `min` and `max` fold one field: the first record of a key gives every other field,
the field holds the running sum, minimum or maximum. `min_by` and `max_by` keep a whole
record: the one with the smallest (largest) field so far, the earliest on a tie. The field
is a position (tuples, lists, Rows) or a name (Rows, dicts, named tuples, objects); a
record of a basic type (a number, a string) is its own field 0. The accumulator is never
changed in place (state snapshots may share it): a changed field makes a new record.
"""

from __future__ import annotations

import copy
from typing import Any

from barrierflow.core.row import Row

KINDS = ("sum", "min", "max", "min_by", "max_by")


class FieldAggregation:
    """`reduce(a, b)` for one aggregation `kind` over field `position`."""

    def __init__(self, kind: str, position: int | str) -> None:
        assert kind in KINDS
        self.kind = kind
        self.position = position

    def __call__(self, accumulator: Any, value: Any) -> Any:
        kind, position = self.kind, self.position
        if _is_basic(value, position):
            if position != 0:
                raise TypeError(
                    f"{kind}({position!r}) on a {type(value).__name__} record: a record of a "
                    "basic type has only field 0 (the record itself)"
                )
            old, new = accumulator, value
        else:
            old, new = _field(accumulator, position), _field(value, position)
        if kind == "min_by":
            return value if new < old else accumulator
        if kind == "max_by":
            return value if new > old else accumulator
        if kind == "sum":
            result = old + new
        elif kind == "min":
            result = new if new < old else old
        else:
            result = new if new > old else old
        if _is_basic(value, position):
            return result
        return _with_field(accumulator, position, result)

    def __repr__(self) -> str:
        return f"{self.kind}({self.position!r})"


def _is_row(value: Any) -> bool:
    """A `Row`: fields by position and by name."""
    return isinstance(value, Row)


def _is_basic(value: Any, position: int | str) -> bool:
    if isinstance(value, (tuple, list, dict)) or _is_row(value):
        return False
    return not isinstance(position, str)


def _field(value: Any, position: int | str) -> Any:
    if isinstance(position, str) and not isinstance(value, dict) and not _is_row(value):
        try:
            return getattr(value, position)
        except AttributeError:
            raise KeyError(f"the record {value!r:.100} has no field {position!r}") from None
    try:
        return value[position]
    except (KeyError, IndexError, TypeError) as error:
        raise KeyError(f"the record {value!r:.100} has no field {position!r}") from error


def _with_field(value: Any, position: int | str, field_value: Any) -> Any:
    """A copy of `value` with field `position` set (the original untouched)."""
    if isinstance(value, dict):
        return {**value, position: field_value}
    if isinstance(value, tuple) and hasattr(value, "_replace"):  # a named tuple
        name = position if isinstance(position, str) else value._fields[position]
        return value._replace(**{name: field_value})
    if isinstance(value, (tuple, list)) and not _is_row(value):
        fields = list(value)
        fields[position] = field_value  # type: ignore[index]
        return tuple(fields) if isinstance(value, tuple) else fields
    changed = copy.copy(value)
    if isinstance(position, str) and not _is_row(value):
        setattr(changed, position, field_value)
    else:
        changed[position] = field_value
    return changed
