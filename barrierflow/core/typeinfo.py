"""`Types` and `TypeInformation`: PyFlink's declared record types (`pyflink.common.Types`).

barrierflow moves Python objects between tasks as they are, so most declared types are
informational: `map(f, output_type=Types.INT())` runs as `map(f)`. Three things follow a
declared type, as in PyFlink: a row type (`Types.ROW`, `Types.ROW_NAMED`) turns each record
into a `Row` with the type's field names (`conform`); a `Types.FLOAT()` value is a 32-bit
float wherever PyFlink's records pass through Java (`conform`, below); and `print()` writes
records as Flink prints values of that type (`core/record_text.py`).

Where PyFlink 2.3 narrows a `Types.FLOAT()` value to 32 bits (found by running it here):
`from_collection(..., type_info=...)` converts each element on the JVM (`Double.floatValue`:
110.1 becomes 110.0999984741211, 1e40 becomes inf); an operator's output declared FLOAT is
written by PyFlink's FloatCoder (4 bytes) when it leaves its chain of Python operators: at
`key_by`, a repartitioning and a sink, but not into the next chained Python function. Its
keyed state keeps the Python object in its cache (the recorded `state_access` output sums
unrounded values), so state declared FLOAT is not narrowed here either. `conform` is that
conversion: rows, and FLOAT values (nested in rows, tuples, lists, arrays and map values)
rounded to the nearest 32-bit float, out of range to +-inf, nan kept. `from_collection`
calls it `strict`, as PyFlink's converter refuses what is no Python float in a FLOAT place
(an int, a bool; None outside a row, list, array or map) when the job is built.

>>> Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])
RowTypeInfo(word: String, count: Integer)
>>> Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()]).conform(("a", 1))
Row(word='a', count=1)
>>> Types.TUPLE([Types.STRING(), Types.LONG()])
TupleTypeInfo(String, Long)
>>> Types.TUPLE([Types.STRING(), Types.FLOAT()]).conform(("a", 110.1))
('a', 110.0999984741211)
"""

from __future__ import annotations

import math
import struct
from enum import Enum
from typing import Any

from barrierflow.core.row import Row, RowKind
from barrierflow.errors import ConfigurationError

__all__ = [
    "BasicArrayTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "ObjectArrayTypeInfo",
    "PickledBytesTypeInfo",
    "PrimitiveArrayTypeInfo",
    "RowTypeInfo",
    "SqlTimeTypeInfo",
    "TupleTypeInfo",
    "TypeInformation",
    "Types",
    "check_type_info",
    "float32",
    "float32_text",
]


def float32(value: float) -> float:
    """`value` rounded to the nearest 32-bit float, as Java's `(float)` and PyFlink's
    FloatCoder do: beyond the float range to +-inf, nan kept (Python's struct refuses)."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def float32_text(value: float) -> str:
    """The shortest decimal text of `value`'s 32-bit float (what Java's `Float.toString`
    shows, before its exponent form): `110.1` for 110.1, `inf`/`nan` as Python writes them."""
    narrowed = float32(value)
    if math.isnan(narrowed) or math.isinf(narrowed):
        return repr(narrowed)
    for digits in range(1, 10):
        shortest = repr(float(f"{narrowed:.{digits}g}"))
        if float32(float(shortest)) == narrowed:
            return shortest
    return repr(narrowed)


class _Mode(Enum):
    """How far `TypeInformation._convert` goes (see the module)."""

    ROWS = "rows"  # records made rows, nothing narrowed (print of a row, as PyFlink's)
    CROSSING = "crossing"  # rows, and FLOAT values narrowed as PyFlink's coder does
    COLLECTION = "collection"  # the same, refusing what PyFlink's JVM converter refuses
    COLLECTED = "collected"  # crossing, then back from the JVM as execute_and_collect does


class TypeInformation:
    """A declared record type; see the module for what it changes."""

    def conform(self, value: Any, *, strict: bool = False) -> Any:
        """The record as PyFlink delivers this type past a chain of Python functions: rows
        made, FLOAT values 32-bit (see the module). `strict`: as `from_collection` converts
        it; TypeError naming the value for what PyFlink refuses there."""
        return self._convert(value, _Mode.COLLECTION if strict else _Mode.CROSSING)

    def collected(self, value: Any) -> Any:
        """`value` as PyFlink's `execute_and_collect` hands it back from the JVM: a FLOAT
        value is the shortest decimal of its 32-bit float (110.1 stays 110.1, 1e40 is inf)."""
        return self._convert(value, _Mode.COLLECTED)

    def shapes_records(self) -> bool:
        """Whether `conform` changes records (the API skips a no-op step otherwise)."""
        return self.narrows_floats()

    def narrows_floats(self) -> bool:
        """Whether the type holds a `Types.FLOAT()` somewhere (so `conform` rounds)."""
        return False

    def _convert(self, value: Any, mode: _Mode) -> Any:
        return value

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicTypeInfo(TypeInformation):
    """A single value: String, Integer, Long, Double, BigDecimal, Instant, ...; the name
    is Java's class name, as PyFlink's repr shows it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def narrows_floats(self) -> bool:
        return self.name == "Float"

    def _convert(self, value: Any, mode: _Mode) -> Any:
        if self.name != "Float" or mode is _Mode.ROWS:
            return value
        if value is None:
            raise TypeError("None is no Float: Types.FLOAT() holds null only as a row field")
        if isinstance(value, float) or (
            mode is not _Mode.COLLECTION and isinstance(value, int) and abs(value) < 2**1024
        ):
            if mode is _Mode.COLLECTED:  # py4j hands a Java Float over as its text
                return float(float32_text(float(value)))
            return float32(float(value))
        raise TypeError(f"{value!r} is no Float: Types.FLOAT() takes a Python float")

    def __repr__(self) -> str:
        return self.name


class SqlTimeTypeInfo(TypeInformation):
    """`datetime.date`, `datetime.time` or `datetime.datetime` (Date, Time, Timestamp)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class PickledBytesTypeInfo(TypeInformation):
    """Any Python object (PyFlink pickles it; barrierflow does so between tasks anyway)."""

    def __repr__(self) -> str:
        return "PickledByteArrayTypeInfo"


class _ElementTypeInfo(TypeInformation):
    label = ""

    def __init__(self, element_type: TypeInformation) -> None:
        self.element_type = check_type_info(element_type, f"Types.{self.label}'s element type")

    def narrows_floats(self) -> bool:
        return self.element_type.narrows_floats()

    def _convert(self, value: Any, mode: _Mode) -> Any:
        if not self.narrows_floats() or mode is _Mode.ROWS or not isinstance(value, list):
            return value
        nulls = not isinstance(self, PrimitiveArrayTypeInfo)
        return [
            None if item is None and nulls else self.element_type._convert(item, mode)
            for item in value
        ]

    def __repr__(self) -> str:
        return f"{type(self).__name__}<{self.element_type!r}>"


class PrimitiveArrayTypeInfo(_ElementTypeInfo):
    """An array of a primitive type (a list, or `bytes` for bytes)."""

    label = "PRIMITIVE_ARRAY"


class BasicArrayTypeInfo(_ElementTypeInfo):
    """An array of boxed basic values (a list)."""

    label = "BASIC_ARRAY"


class ObjectArrayTypeInfo(_ElementTypeInfo):
    """An array of any declared type (a list)."""

    label = "OBJECT_ARRAY"


class ListTypeInfo(_ElementTypeInfo):
    """A list."""

    label = "LIST"


class MapTypeInfo(TypeInformation):
    """A dict."""

    def __init__(self, key_type: TypeInformation, value_type: TypeInformation) -> None:
        self.key_type = check_type_info(key_type, "Types.MAP's key type")
        self.value_type = check_type_info(value_type, "Types.MAP's value type")

    def narrows_floats(self) -> bool:
        return self.key_type.narrows_floats() or self.value_type.narrows_floats()

    def _convert(self, value: Any, mode: _Mode) -> Any:
        if not self.narrows_floats() or mode is _Mode.ROWS or not isinstance(value, dict):
            return value
        return {
            self.key_type._convert(k, mode): None
            if v is None
            else self.value_type._convert(v, mode)
            for k, v in value.items()
        }

    def __repr__(self) -> str:
        return f"MapTypeInfo<{self.key_type!r}, {self.value_type!r}>"


class TupleTypeInfo(TypeInformation):
    """A tuple of fixed arity."""

    def __init__(self, field_types: list[TypeInformation]) -> None:
        self.field_types = _field_types(field_types, "Types.TUPLE")

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def narrows_floats(self) -> bool:
        return any(t.narrows_floats() for t in self.field_types)

    def _convert(self, value: Any, mode: _Mode) -> Any:
        if not self.narrows_floats() or mode is _Mode.ROWS:
            return value
        if not isinstance(value, tuple | list) or len(value) != len(self.field_types):
            raise TypeError(f"{value!r} is no tuple of {len(self.field_types)} fields ({self!r})")
        return tuple(t._convert(v, mode) for t, v in zip(self.field_types, value, strict=True))

    def __repr__(self) -> str:
        return "TupleTypeInfo({})".format(", ".join(repr(t) for t in self.field_types))


class RowTypeInfo(TypeInformation):
    """A `Row`: each record becomes one with these field names (`f0`, `f1`, ... unless
    named), from a tuple or list (by position), a dict or an object (by name), or a Row
    (by name if it has names, else by position; its kind kept); nested row fields too."""

    def __init__(
        self, field_types: list[TypeInformation], field_names: list[str] | None = None
    ) -> None:
        self.field_types = _field_types(field_types, "Types.ROW")
        if field_names is None:
            self.field_names = [f"f{i}" for i in range(len(self.field_types))]
            self.named = False
        else:
            names = list(field_names)
            if len(names) != len(self.field_types) or not all(isinstance(n, str) for n in names):
                raise ConfigurationError(
                    f"Types.ROW_NAMED needs one name (str) per field type: got names {names!r} "
                    f"for {len(self.field_types)} types"
                )
            if len(set(names)) != len(names):
                raise ConfigurationError(f"Types.ROW_NAMED has a field name twice: {names!r}")
            self.field_names = names
            self.named = True

    def get_field_names(self) -> list[str]:
        return list(self.field_names)

    def get_field_index(self, field_name: str) -> int:
        return self.field_names.index(field_name) if field_name in self.field_names else -1

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

    def shapes_records(self) -> bool:
        return True

    def narrows_floats(self) -> bool:
        return any(t.narrows_floats() for t in self.field_types)

    def to_row(self, value: Any) -> Any:
        """`value` as a Row of this type, its fields as they are (nested rows made rows)."""
        return self._convert(value, _Mode.ROWS)

    def _convert(self, value: Any, mode: _Mode) -> Any:
        if value is None:
            return None
        kind = RowKind.INSERT
        if isinstance(value, Row):
            kind = value.get_row_kind()
            names = value.get_field_names()
            values = list(value) if names is None else value.get_fields_by_names(self.field_names)
        elif isinstance(value, dict):
            values = [value.get(name) for name in self.field_names]
        elif isinstance(value, tuple | list):
            values = list(value)
        elif hasattr(value, "__dict__"):
            values = [getattr(value, name, None) for name in self.field_names]
        else:
            raise TypeError(f"{value!r} is not a row of {self!r}")
        if len(values) != len(self.field_names):
            raise TypeError(
                f"{value!r} has {len(values)} fields, {self!r} has {len(self.field_names)}"
            )
        values = [
            None if field is None else field_type._convert(field, mode)
            for field_type, field in zip(self.field_types, values, strict=True)
        ]
        row = Row(**dict(zip(self.field_names, values, strict=True)))
        row.set_row_kind(kind)
        return row

    def __repr__(self) -> str:
        if self.named:
            pairs = zip(self.field_names, self.field_types, strict=True)
            fields = (f"{n}: {t!r}" for n, t in pairs)
        else:
            fields = (repr(t) for t in self.field_types)
        return "RowTypeInfo({})".format(", ".join(fields))


def _field_types(field_types: list[TypeInformation], what: str) -> list[TypeInformation]:
    if not isinstance(field_types, list | tuple):
        raise ConfigurationError(f"{what} takes a list of field types, got {field_types!r}")
    return [check_type_info(t, f"{what}'s field type") for t in field_types]


def check_type_info(value: Any, what: str) -> TypeInformation:
    """`value` if it is a TypeInformation; else one line naming `what` (when the job is
    built: `output_type=`, `type_info=` and the factories call it)."""
    if not isinstance(value, TypeInformation):
        factory = getattr(value, "__qualname__", "").startswith("Types.")
        hint = f" (call it: {value.__qualname__}())" if factory else ""
        raise ConfigurationError(f"{what} must be a Types.X() value, got {value!r}{hint}")
    return value


class Types:
    """PyFlink's factories of declared types, upper-case as PyFlink spells them:
    `Types.STRING()`, `Types.ROW_NAMED(...)`."""

    @staticmethod
    def STRING() -> TypeInformation:
        return BasicTypeInfo("String")

    @staticmethod
    def BYTE() -> TypeInformation:
        return BasicTypeInfo("Byte")

    @staticmethod
    def BOOLEAN() -> TypeInformation:
        return BasicTypeInfo("Boolean")

    @staticmethod
    def SHORT() -> TypeInformation:
        return BasicTypeInfo("Short")

    @staticmethod
    def INT() -> TypeInformation:
        return BasicTypeInfo("Integer")

    @staticmethod
    def LONG() -> TypeInformation:
        return BasicTypeInfo("Long")

    @staticmethod
    def FLOAT() -> TypeInformation:
        return BasicTypeInfo("Float")

    @staticmethod
    def DOUBLE() -> TypeInformation:
        return BasicTypeInfo("Double")

    @staticmethod
    def CHAR() -> TypeInformation:
        return BasicTypeInfo("Char")

    @staticmethod
    def BIG_INT() -> TypeInformation:
        return BasicTypeInfo("BigInteger")

    @staticmethod
    def BIG_DEC() -> TypeInformation:
        return BasicTypeInfo("BigDecimal")

    @staticmethod
    def INSTANT() -> TypeInformation:
        return BasicTypeInfo("Instant")

    @staticmethod
    def SQL_DATE() -> TypeInformation:
        return SqlTimeTypeInfo("Date")

    @staticmethod
    def SQL_TIME() -> TypeInformation:
        return SqlTimeTypeInfo("Time")

    @staticmethod
    def SQL_TIMESTAMP() -> TypeInformation:
        return SqlTimeTypeInfo("Timestamp")

    @staticmethod
    def PICKLED_BYTE_ARRAY() -> TypeInformation:
        return PickledBytesTypeInfo()

    @staticmethod
    def ROW(field_types: list[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list[str], field_types: list[TypeInformation]) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list[TypeInformation]) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return PrimitiveArrayTypeInfo(element_type)

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return BasicArrayTypeInfo(element_type)

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> TypeInformation:
        return ObjectArrayTypeInfo(element_type)

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> TypeInformation:
        return MapTypeInfo(key_type_info, value_type_info)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> TypeInformation:
        return ListTypeInfo(element_type_info)
