"""Files as a replayable source and an exactly-once sink.

`FileSource.for_lines(path)` and `FileSource.for_json_lines(path)` read a file or a folder
of files, and with `.monitor_continuously(interval)` keep watching the folder for new files;
`ParquetSource(path)` reads Parquet as Arrow record batches (a row group per split) that
stay columnar through the job; `FileSink.for_rows(path)` writes JSON Lines or Parquet part
files (partition folders, a `RollingPolicy`) by two-phase commit. Paths are local paths or
URIs of any filesystem pyarrow knows (`file://`, `s3://`, `hdfs://`). `BadLine` and
`line_number_at` name an undecodable line by file, line number and byte offset, for other
line-reading sources (Nexmark's event files).
"""

from typing import Any

from barrierflow.connectors.files._lines import line_number_at
from barrierflow.connectors.files._parquet_source import ParquetSource
from barrierflow.connectors.files._source import BadLine

__all__ = ["BadLine", "FileSink", "FileSource", "ParquetSource", "RollingPolicy", "line_number_at"]

_PYFLINK_SHAPED = ("FileSink", "FileSource", "RollingPolicy")


def __getattr__(name: str) -> Any:
    """`FileSink`, `FileSource` and `RollingPolicy` are the classes of
    `barrierflow.connectors.file_system`, which add PyFlink's builders to this package's: one
    class per name, whichever path a job imports it from. Resolved on first use, since
    `file_system` is built on this package's modules."""
    if name in _PYFLINK_SHAPED:
        from barrierflow.connectors import file_system

        return getattr(file_system, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
