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

from barrierflow.connectors.files._lines import line_number_at
from barrierflow.connectors.files._parquet_source import ParquetSource
from barrierflow.connectors.files._sink import FileSink, RollingPolicy
from barrierflow.connectors.files._source import BadLine, FileSource

__all__ = ["BadLine", "FileSink", "FileSource", "ParquetSource", "RollingPolicy", "line_number_at"]
