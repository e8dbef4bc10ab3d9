"""`Types` and `TypeInformation`: PyFlink's declared record types (`pyflink.common.Types`).

barrierflow moves Python objects between tasks as they are, so most declared types are
informational: `map(f, output_type=Types.INT())` runs as `map(f)`. Two things follow a
declared type, as in PyFlink: a row type (`Types.ROW`, `Types.ROW_NAMED`) turns each record
into a `Row` with the type's field names (`conform`), and `print()` writes records as Flink
prints values of that type (`core/java_strings.py`).

>>> Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()])
RowTypeInfo(word: String, count: Integer)
>>> Types.ROW_NAMED(["word", "count"], [Types.STRING(), Types.INT()]).conform(("a", 1))
Row(word='a', count=1)
>>> Types.TUPLE([Types.STRING(), Types.LONG()])
TupleTypeInfo(String, Long)
"""

from __future__ import annotations

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
]


class TypeInformation:
    """A declared record type; see the module for what it changes."""

    def conform(self, value: Any) -> Any:
        """The record as this type delivers it to the next function (as it is, but rows)."""
        return value

    def shapes_records(self) -> bool:
        """Whether `conform` changes records (the API skips a no-op step otherwise)."""
        return False

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


class BasicTypeInfo(TypeInformation):
    """A single value: String, Integer, Long, Double, BigDecimal, Instant, ...; the name
    is Java's class name, as PyFlink's repr shows it."""

    def __init__(self, name: str) -> None:
        self.name = name

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

    def __repr__(self) -> str:
        return f"MapTypeInfo<{self.key_type!r}, {self.value_type!r}>"


class TupleTypeInfo(TypeInformation):
    """A tuple of fixed arity."""

    def __init__(self, field_types: list[TypeInformation]) -> None:
        self.field_types = _field_types(field_types, "Types.TUPLE")

    def get_field_types(self) -> list[TypeInformation]:
        return list(self.field_types)

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

    def conform(self, value: Any) -> Any:
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
            field_type.conform(field) if isinstance(field_type, RowTypeInfo) else field
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
