"""Reaching an Iceberg table through PyIceberg: the lazy import, the catalog, the table's
files, and rows checked against the table's schema.

Shared by the sink and the source. `catalog_properties` are what
`pyiceberg.catalog.load_catalog(name, **properties)` takes: `{"type": "sql", "uri":
"sqlite:///...", "warehouse": "file:///..."}` for the embedded default, or a REST, Hive or
Glue catalog by its own properties. `warehouse_catalog(folder)` gives the embedded one for a
folder on a laptop.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from barrierflow.errors import BarrierflowError, SinkError

__all__ = [
    "Misfit",
    "check_columns",
    "check_partitioning",
    "connect",
    "convert_rows",
    "dead_letter_schema",
    "folder_of",
    "load_table",
    "pyiceberg",
    "required",
    "warehouse_catalog",
]


def pyiceberg(error: type[BarrierflowError]) -> Any:
    """The `pyiceberg` package, or `error` saying how to install it."""
    try:
        import pyiceberg
        import pyiceberg.catalog
    except ImportError:
        raise error(
            "the Iceberg connector needs pyiceberg: pip install 'barrierflow[iceberg]'"
        ) from None
    return pyiceberg


def warehouse_catalog(folder: str | os.PathLike[str]) -> dict[str, str]:
    """The embedded catalog of a local folder: a SQL catalog in `<folder>/catalog.db`
    (SQLite) with the table files under `<folder>`.

    >>> warehouse_catalog("/data/lake")["uri"]
    'sqlite:////data/lake/catalog.db'
    """
    path = os.path.abspath(os.path.expanduser(os.fspath(folder)))
    return {"type": "sql", "uri": f"sqlite:///{path}/catalog.db", "warehouse": f"file://{path}"}


def connect(properties: Mapping[str, str], name: str, error: type[BarrierflowError]) -> Any:
    """The catalog `properties` describe, or `error` naming what failed."""
    pyiceberg(error)
    from pyiceberg.catalog import load_catalog

    props = {str(k): str(v) for k, v in properties.items()}
    uri = props.get("uri", "")
    if uri.startswith("sqlite:///"):
        folder = os.path.dirname(uri[len("sqlite:///") :])
        if folder:
            os.makedirs(folder, exist_ok=True)
    warehouse = props.get("warehouse", "")
    if warehouse.startswith("file://"):
        os.makedirs(warehouse[len("file://") :], exist_ok=True)
    try:
        return load_catalog(name, **props)
    except Exception as problem:
        raise error(
            f"cannot open the Iceberg catalog {name!r} ({props.get('type', 'no type')}): "
            f"{_one_line(problem)}"
        ) from None


def load_table(catalog: Any, table: str, error: type[BarrierflowError]) -> Any:
    """The table `table` ("namespace.name"), or `error` saying it is missing."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(table)
    except NoSuchTableError:
        raise error(
            f"Iceberg table {table!r} does not exist in catalog {catalog.name!r}: create it "
            "first, or give the sink a schema (with_schema) to create it"
        ) from None
    except Exception as problem:
        raise error(f"cannot load Iceberg table {table!r}: {_one_line(problem)}") from None


def folder_of(table: Any, location: str) -> tuple[Any, str]:
    """(pyarrow filesystem, path) of `location` through the table's own FileIO settings."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    io = table.io
    if isinstance(io, PyArrowFileIO):
        scheme, netloc, path = PyArrowFileIO.parse_location(location, io.properties)
        return io.fs_by_scheme(scheme, netloc), path
    from pyarrow import fs as pafs

    return pafs.FileSystem.from_uri(location)


class Misfit(Exception):
    """Row `index` of a batch does not fit the table's schema, because of `why`."""

    def __init__(self, index: int, why: str) -> None:
        super().__init__(why)
        self.index, self.why = index, why


def convert_rows(records: list[Any], schema: Any) -> Any:
    """`records` (dicts of column -> value) as an Arrow table of `schema`, or `Misfit`
    naming the first row and column that do not fit."""
    import pyarrow as pa

    names = set(schema.names)
    for index, row in enumerate(records):
        if not isinstance(row, Mapping):
            raise Misfit(index, "a row must be a dict")
        if not names.issuperset(row):
            extra = sorted(set(row) - names)
            raise Misfit(index, f"column '{extra[0]}' is not in the table")
    try:
        table = pa.Table.from_pylist(records, schema=schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        raise _culprit(records, schema) from None
    for field, column in zip(schema, table.columns, strict=True):
        if not field.nullable and column.null_count:
            index = column.to_pylist().index(None)
            raise Misfit(index, f"column '{field.name}' may not be null")
    return table


def _culprit(records: list[Any], schema: Any) -> Misfit:
    import pyarrow as pa

    for index, row in enumerate(records):
        for field in schema:
            try:
                pa.array([row.get(field.name)], type=field.type)
            except (pa.ArrowException, TypeError, ValueError, OverflowError) as error:
                value = row.get(field.name)
                return Misfit(
                    index,
                    f"column '{field.name}' of type {field.type} cannot hold {value!r:.80} "
                    f"({_one_line(error)})",
                )
    return Misfit(0, "the rows do not convert to the table's schema")


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def check_columns(schema: Any, table: Any, name: str) -> None:
    """Each column of the configured schema is the table's, with the same type."""
    actual = table.schema()
    for field in schema.fields:
        if field.name not in actual.column_names:
            raise SinkError(f"{name}: the table has no column '{field.name}'")
        other = actual.find_field(field.name)
        if other.field_type != field.field_type:
            raise SinkError(
                f"{name}: column '{field.name}' is {other.field_type} in the table, "
                f"{field.field_type} in the sink's schema"
            )


def check_partitioning(table: Any, name: str) -> None:
    """Each partition transform of the table can be computed here: PyIceberg computes
    bucket, truncate and the time transforms only with `pyiceberg-core` installed, and
    would otherwise fail at the first checkpoint, after the job started."""
    schema = table.schema()
    for field in table.spec().fields:
        source = schema.find_field(field.source_id)
        try:
            field.transform.pyarrow_transform(source.field_type)
        except Exception as error:
            raise SinkError(
                f"{name}: cannot write the table's partition field '{field.name}' "
                f"({field.transform}({source.name})): {_one_line(error)}"
            ) from None


def required(schema: Any, ids: list[int]) -> Any:
    """`schema` with the fields `ids` required and as its identifier fields."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    fields = [
        NestedField(f.field_id, f.name, f.field_type, required=True, doc=f.doc)
        if f.field_id in ids
        else f
        for f in schema.fields
    ]
    return Schema(*fields, identifier_field_ids=ids)


def dead_letter_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("sink", pa.string(), nullable=False),
            pa.field("row", pa.string()),
            pa.field("error", pa.string(), nullable=False),
            pa.field("failed_at", pa.timestamp("us", tz="UTC"), nullable=False),
        ]
    )
