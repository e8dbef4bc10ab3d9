"""The file connector's PyFlink names that wrap Java choices barrierflow makes itself, or
Java code it cannot run (exported from `barrierflow.connectors.file_system`):

- `FileEnumeratorProvider` / `FileSplitAssignerProvider`: which files a `FileSource` reads
  and which subtask reads each. barrierflow's `FileSource` lists the path recursively,
  skipping hidden files ('.' or '_'), makes each file one split (a splittable enumerator's
  block splits would give the same records) and deals the splits by name; Spark places the
  tasks, so there is no locality to prefer. `FileSourceBuilder.set_file_enumerator` /
  `set_split_assigner` accept these and change nothing.
- `FileCompactStrategy` / `FileCompactor`: settings for `enable_compact`, which
  barrierflow's `FileSink` refuses when the sink is built (`COMPACTION_REFUSED`).
- `BulkFormat` and `StreamingFileSink` (Flink's legacy sink function) wrap Java code:
  refused when used, naming what to use instead.

>>> FileCompactStrategy.builder().enable_compaction_on_checkpoint(3).build()
FileCompactStrategy(checkpoints=3, size_threshold=-1, threads=1)
"""

from __future__ import annotations

from typing import Any

from barrierflow.errors import ConfigurationError, JobDefinitionError

__all__ = [
    "BULK_FORMAT_REFUSED",
    "COMPACTION_REFUSED",
    "STREAMING_FILE_SINK_REFUSED",
    "BulkFormat",
    "FileCompactStrategy",
    "FileCompactor",
    "FileEnumeratorProvider",
    "FileSplitAssignerProvider",
    "StreamingFileSink",
]

COMPACTION_REFUSED = (
    "FileSink compaction (enable_compact) is not supported: barrierflow publishes each part "
    "file at a checkpoint and merges none; roll fewer, larger files with "
    "RollingPolicy.default_rolling_policy(part_size=..., rollover_interval=...)"
)
BULK_FORMAT_REFUSED = (
    "BulkFormat wraps a Java reader format, which barrierflow cannot run: read Parquet with "
    "barrierflow.connectors.files.ParquetSource"
)
STREAMING_FILE_SINK_REFUSED = (
    "StreamingFileSink is Flink's legacy Java sink function, which barrierflow cannot run: "
    "use FileSink.for_row_format(path, encoder).build() with sink_to"
)


class FileEnumeratorProvider:
    """Which files a source reads: accepted, unused (see the module's docstring)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def default_splittable_file_enumerator() -> FileEnumeratorProvider:
        return FileEnumeratorProvider("splittable")

    @staticmethod
    def default_non_splittable_file_enumerator() -> FileEnumeratorProvider:
        return FileEnumeratorProvider("non-splittable")

    def __repr__(self) -> str:
        return f"FileEnumeratorProvider({self.kind!r})"


class FileSplitAssignerProvider:
    """Which subtask reads which split: accepted, unused (see the module's docstring)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def locality_aware_split_assigner() -> FileSplitAssignerProvider:
        return FileSplitAssignerProvider("locality-aware")

    def __repr__(self) -> str:
        return f"FileSplitAssignerProvider({self.kind!r})"


class FileCompactStrategy:
    """When Flink would compact a sink's files; `FileSink`'s `enable_compact` refuses it."""

    def __init__(self, checkpoints: int = -1, size_threshold: int = -1, threads: int = 1) -> None:
        self.checkpoints = checkpoints
        self.size_threshold = size_threshold
        self.threads = threads

    @staticmethod
    def builder() -> FileCompactStrategy.Builder:
        return FileCompactStrategy.Builder()

    def __repr__(self) -> str:
        return (
            f"FileCompactStrategy(checkpoints={self.checkpoints}, "
            f"size_threshold={self.size_threshold}, threads={self.threads})"
        )

    class Builder:
        """PyFlink's builder; the values are checked as Flink checks them."""

        def __init__(self) -> None:
            self._checkpoints = -1
            self._size = -1
            self._threads = 1

        def enable_compaction_on_checkpoint(
            self, num_checkpoints_before_compaction: int
        ) -> FileCompactStrategy.Builder:
            self._checkpoints = _at_least(num_checkpoints_before_compaction, 1, "checkpoints")
            return self

        def set_size_threshold(self, size_threshold: int) -> FileCompactStrategy.Builder:
            self._size = _at_least(size_threshold, -1, "size threshold")
            return self

        def set_num_compact_threads(self, num_compact_threads: int) -> FileCompactStrategy.Builder:
            self._threads = _at_least(num_compact_threads, 1, "compact threads")
            return self

        def build(self) -> FileCompactStrategy:
            return FileCompactStrategy(self._checkpoints, self._size, self._threads)


class FileCompactor:
    """How Flink would merge files; `FileSink`'s `enable_compact` refuses it."""

    def __init__(self, kind: str, file_delimiter: bytes | None = None) -> None:
        self.kind = kind
        self.file_delimiter = file_delimiter

    @staticmethod
    def concat_file_compactor(file_delimiter: bytes | None = None) -> FileCompactor:
        return FileCompactor("concat", file_delimiter or None)

    @staticmethod
    def identical_file_compactor() -> FileCompactor:
        return FileCompactor("identical")

    def __repr__(self) -> str:
        return f"FileCompactor({self.kind!r})"


class BulkFormat:
    """PyFlink's wrapper of a Java bulk reader format: refused when constructed."""

    def __init__(self, j_bulk_format: Any = None) -> None:
        raise JobDefinitionError(BULK_FORMAT_REFUSED)


class StreamingFileSink:
    """Flink's legacy file sink function: refused when built, naming `FileSink`."""

    def __init__(self, j_obj: Any = None) -> None:
        raise JobDefinitionError(STREAMING_FILE_SINK_REFUSED)

    @staticmethod
    def for_row_format(base_path: str, encoder: Any) -> Any:
        raise JobDefinitionError(STREAMING_FILE_SINK_REFUSED)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: Any) -> Any:
        raise JobDefinitionError(STREAMING_FILE_SINK_REFUSED)


def _at_least(value: Any, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"file compaction's {what} must be an integer >= {minimum}, got {value!r}"
        )
    return value
