"""How `print()` (and `Encoder.simple_string_encoder()`) writes a record of a declared type,
as PyFlink 2.3 prints it (recorded by running PyFlink, tests/api/test_types_printing.py).

Without a declared type (or `Types.PICKLED_BYTE_ARRAY()`) a record is its Python `str()`:
`('a', 1)`, `True`, `<Row('a', 1)>`. With one, Flink's text of that type: a row is its kind
and its fields' Python text joined by commas (`+I[a,1]`, `+I[a,None]`), a tuple
`(a,1)`, a boolean `true`, a map `{k=1}`, a timestamp `2024-01-02 03:04:05.123`.

>>> from barrierflow.core.typeinfo import Types
>>> record_text(("a", 1), Types.ROW([Types.STRING(), Types.INT()]))
'+I[a,1]'
>>> record_text(("a", 1), Types.TUPLE([Types.STRING(), Types.INT()]))
'(a,1)'
>>> record_text(("a", 1), None)
"('a', 1)"
"""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any

from barrierflow.core.row import Row
from barrierflow.core.typeinfo import (
    BasicTypeInfo,
    MapTypeInfo,
    RowTypeInfo,
    SqlTimeTypeInfo,
    TupleTypeInfo,
    TypeInformation,
    float32,
    float32_text,
)

__all__ = ["record_text"]


def record_text(value: Any, type_info: TypeInformation | None, *, java_rows: bool = False) -> str:
    """The text `print()` writes for `value` of the declared `type_info` (see the module);
    `java_rows`: a row as Flink's `Row.toString()` (`+I[a, 1]`), as a FileSink's
    `Encoder.simple_string_encoder()` writes it."""
    if type_info is None or (value is None and not isinstance(type_info, RowTypeInfo)):
        return "null" if value is None and type_info is not None else str(value)
    if isinstance(type_info, RowTypeInfo):
        row = type_info.to_row(value)  # PyFlink prints a row's fields in Python, as they are
        if row is None:
            return "null"
        separator = ", " if java_rows else ","
        return f"{row.get_row_kind()}[{separator.join(str(field) for field in row)}]"
    if isinstance(type_info, TupleTypeInfo) and isinstance(value, tuple | list):
        fields = [
            record_text(field, field_type)
            for field, field_type in zip(value, type_info.field_types, strict=False)
        ]
        return "(" + ",".join(fields) + ")"
    if isinstance(type_info, MapTypeInfo) and isinstance(value, dict):
        pairs = (
            f"{record_text(k, type_info.key_type)}={record_text(v, type_info.value_type)}"
            for k, v in value.items()
        )
        return "{" + ", ".join(pairs) + "}"
    if isinstance(type_info, BasicTypeInfo):
        return _basic_text(value, type_info.name)
    if isinstance(type_info, SqlTimeTypeInfo):
        return _sql_time_text(value)
    return str(value)


def _basic_text(value: Any, java_class: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float | int) and java_class == "Float":
        return _java_float(float(value))
    if isinstance(value, float) and java_class == "Double":
        return _java_double(value)
    if isinstance(value, Row):
        return str(value)
    return str(value)


def _java_float(value: float) -> str:
    """Java's `Float.toString` of the value a Java sink holds (32 bits): 110.1 prints
    `110.1`, the shortest digits that give the same 32-bit float back."""
    narrowed = float32(value)
    return _java_double(narrowed, float32_text(narrowed))


def _java_double(value: float, text: str | None = None) -> str:
    """Java's `Double.toString`: `2.0`, `1.0E20`, `1.0E-4`, `NaN`, `Infinity` (`text`:
    the shortest digits of `value`, its repr unless given)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value) if text is None else text
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return text
    sign, digits, exponent = decimal.Decimal(text).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + int(exponent)}"


def _sql_time_text(value: Any) -> str:
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        fraction = f"{value.microsecond:06d}".rstrip("0") or "0"
        return f"{text}.{fraction}"
    return str(value)
