"""Apache Iceberg tables through PyIceberg (`pip install 'barrierflow[iceberg]'`).

`IcebergSink.for_table("db.table", catalog_properties)` writes rows exactly once, one
snapshot per checkpoint through a single committer; `IcebergSource.for_table(...)` reads
a table's appended snapshots as a stream. `catalog_properties` are what
`pyiceberg.catalog.load_catalog` takes; `warehouse_catalog(folder)` (or
`IcebergSink.for_warehouse`) is the embedded SQL catalog on SQLite in a local folder.
docs/connectors/iceberg.md is the guide.
"""

from barrierflow.connectors.iceberg._catalog import warehouse_catalog
from barrierflow.connectors.iceberg._sink import IcebergSink
from barrierflow.connectors.iceberg._source import IcebergSource

__all__ = ["IcebergSink", "IcebergSource", "warehouse_catalog"]
