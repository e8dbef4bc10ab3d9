"""Python state values to Spark columns and back: a schema Spark infers where it can, a
marked fallback where it cannot.

Each column is typed on its own, from all of its values:

- values Spark infers (None, bool, int, float, str, bytes, datetime, decimal, lists,
  dicts, tuples as structs `_1, _2, ...`, nested) keep Spark's inferred type;
- instances of one dataclass (a window's `TimeWindow`, a user's value class) become
  a struct of their fields, the field's metadata naming the class
  (`barrierflow.dataclass`: "module:qualname") so it is rebuilt when written back;
- anything else (objects, mixed types, ints beyond 64 bits) becomes a binary column
  of each value's pickle (protocol 5), marked `barrierflow.pickled` in the field's
  metadata; `pickle.loads` turns a cell back into the value, and the writer does so
  by itself;
- a column of only None is a string column of nulls.

Going back (`python_value`), structs become tuples (Spark's `Row` is one), arrays
lists and maps dicts, unless the field's metadata says otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib
import pickle
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructField

PICKLED = "barrierflow.pickled"
"""Field metadata flag: the column holds pickles of the values."""
DATACLASS = "barrierflow.dataclass"
"""Field metadata: the column holds structs of this dataclass ("module:qualname")."""


def to_frame(spark: SparkSession, names: Sequence[str], rows: Iterable[Sequence[Any]]) -> DataFrame:
    """A DataFrame of `rows` with columns `names`, each column typed as the module says."""
    from pyspark.sql.types import StructType

    rows = [tuple(row) for row in rows]
    fields, converters = [], []
    for index, name in enumerate(names):
        field, convert = _column(spark, name, [row[index] for row in rows])
        fields.append(field)
        converters.append(convert)
    converted = [
        tuple(convert(value) for convert, value in zip(converters, row, strict=True))
        for row in rows
    ]
    return spark.createDataFrame(converted, StructType(fields))


def _column(spark: SparkSession, name: str, values: list[Any]) -> tuple[StructField, Any]:
    from pyspark.sql.types import BinaryType, StringType, StructField

    present = [value for value in values if value is not None]
    if not present:
        return StructField(name, StringType(), True), _same
    classes = {type(value) for value in present}
    if len(classes) == 1:
        (cls,) = classes
        if dataclasses.is_dataclass(cls):
            as_struct = _dataclass_struct(cls)
            inferred = _inferred(spark, [as_struct(value) for value in present])
            if inferred is not None:
                metadata = {DATACLASS: f"{cls.__module__}:{cls.__qualname__}"}
                return StructField(name, inferred, True, metadata), _or_none(as_struct)
    inferred = _inferred(spark, present)
    if inferred is not None:
        return StructField(name, inferred, True), _same
    return StructField(name, BinaryType(), True, {PICKLED: True}), _or_none(_pickled)


def _inferred(spark: SparkSession, values: list[Any]) -> DataType | None:
    """The type Spark infers for a column of `values`, or None if it cannot type them."""
    try:
        frame = spark.createDataFrame([(value,) for value in values], ["v"])
    except Exception:  # pyspark raises several error types for values it cannot type
        return None
    data_type = frame.schema["v"].dataType
    return None if _has_null_type(data_type) else data_type


def _has_null_type(data_type: DataType) -> bool:
    from pyspark.sql.types import ArrayType, MapType, NullType, StructType

    if isinstance(data_type, NullType):
        return True
    if isinstance(data_type, ArrayType):
        return _has_null_type(data_type.elementType)
    if isinstance(data_type, MapType):
        return _has_null_type(data_type.keyType) or _has_null_type(data_type.valueType)
    if isinstance(data_type, StructType):
        return any(_has_null_type(field.dataType) for field in data_type.fields)
    return False


def _dataclass_struct(cls: type) -> Any:
    from pyspark.sql import Row

    names = [field.name for field in dataclasses.fields(cls)]

    def as_row(value: Any) -> Any:
        return Row(**{name: getattr(value, name) for name in names})

    return as_row


def _same(value: Any) -> Any:
    return value


def _pickled(value: Any) -> bytes:
    return pickle.dumps(value, protocol=5)


def _or_none(convert: Any) -> Any:
    def converted(value: Any) -> Any:
        return None if value is None else convert(value)

    return converted


# ---- back from Spark ------------------------------------------------------------------------


def python_value(value: Any, field: StructField | None = None) -> Any:
    """A cell read from a DataFrame as the Python value a job keeps in state."""
    if value is None:
        return None
    metadata = field.metadata if field is not None else {}
    if metadata.get(PICKLED):
        return pickle.loads(value)
    if metadata.get(DATACLASS):
        module, _, qualname = metadata[DATACLASS].partition(":")
        cls: Any = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        return cls(**{k: python_value(v) for k, v in value.asDict().items()})
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):  # Spark's Row, and tuples
        return tuple(_plain(item) for item in value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def frame_rows(frame: DataFrame, columns: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    """The `columns` of every row of `frame`, as Python values (streamed to the driver)."""
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise ValueError(
            f"the DataFrame has no column {', '.join(missing)}; it has {', '.join(frame.columns)}"
        )
    fields = [frame.schema[name] for name in columns]
    for row in frame.select(*columns).toLocalIterator():
        yield tuple(python_value(row[i], field) for i, field in enumerate(fields))
