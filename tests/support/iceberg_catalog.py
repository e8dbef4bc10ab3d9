"""A real Iceberg catalog for tests: PyIceberg's SQL catalog on a SQLite file in a folder,
with the warehouse beside it (the connector's embedded default), and table helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from barrierflow.connectors.iceberg import warehouse_catalog


def catalog_properties(folder: Path) -> dict[str, str]:
    """The embedded catalog of `folder` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    return warehouse_catalog(folder)


def open_catalog(properties: dict[str, str]) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("default", **properties)


def table_rows(properties: dict[str, str], table: str) -> list[dict[str, Any]]:
    """Every row the table holds now."""
    return open_catalog(properties).load_table(table).scan().to_arrow().to_pylist()


def snapshot_summaries(properties: dict[str, str], table: str) -> list[dict[str, str]]:
    """The current snapshot's ancestry, oldest first: operation and summary properties."""
    from pyiceberg.table.snapshots import ancestors_of

    loaded = open_catalog(properties).load_table(table)
    found = [
        {"operation": str(s.summary.operation.value), **s.summary.additional_properties}
        for s in ancestors_of(loaded.current_snapshot(), loaded.metadata)
    ]
    return found[::-1]


def parquet_files(folder: Path) -> set[str]:
    """Every Parquet data file under the warehouse `folder` (hand-offs excluded)."""
    return {str(p) for p in folder.rglob("*.parquet") if "/metadata/" not in str(p)}
