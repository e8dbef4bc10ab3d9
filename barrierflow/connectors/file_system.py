"""The file connector in PyFlink's shape (`pyflink.datastream.connectors.file_system`), over
`barrierflow.connectors.files`: the same exactly-once reader and two-phase-commit writer,
built with PyFlink's builders.

    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), path).build()
    stream = env.from_source(source, WatermarkStrategy.no_watermarks(), "lines")
    stream.sink_to(
        FileSink.for_row_format(out, Encoder.simple_string_encoder())
        .with_output_file_config(OutputFileConfig.builder().with_part_prefix("pre").build())
        .with_rolling_policy(RollingPolicy.default_rolling_policy())
        .build()
    )

What differs from Flink: part files are published at checkpoints (always: a row format's
rolling policy adds rolling by size and age), named
`<prefix>-<uid>-<subtask>-<deployment>-<n>-ck<checkpoint>-<lineage><suffix>`, directly in
the base path (`BucketAssigner.base_path_bucket_assigner()`; Flink's default date-time
buckets are refused when the sink is built); the inactivity interval is not used. A source
takes one path (a file or a folder, read recursively).

>>> OutputFileConfig.builder().with_part_prefix("pre").with_part_suffix(".txt").build()
OutputFileConfig(part_prefix='pre', part_suffix='.txt')
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from typing import Any

from barrierflow.connectors.files._formats import TextLineFormat
from barrierflow.connectors.files._part_files import ByteStreamPartFile, PartFile, PartFileFormat
from barrierflow.connectors.files._pyflink_extras import (
    COMPACTION_REFUSED,
    BulkFormat,
    FileCompactor,
    FileCompactStrategy,
    FileEnumeratorProvider,
    FileSplitAssignerProvider,
    StreamingFileSink,
)
from barrierflow.connectors.files._sink import FileSink as _FileSink
from barrierflow.connectors.files._sink import RollingPolicy as _RollingPolicy
from barrierflow.connectors.files._source import FileSource as _FileSource
from barrierflow.core.time import Duration, to_millis
from barrierflow.errors import ConfigurationError
from barrierflow.serialization import Encoder

__all__ = [
    "BucketAssigner",
    "BulkFormat",
    "FileCompactStrategy",
    "FileCompactor",
    "FileEnumeratorProvider",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "FileSplitAssignerProvider",
    "OutputFileConfig",
    "RollingPolicy",
    "StreamFormat",
    "StreamingFileSink",
]


# ---- source ------------------------------------------------------------------------------


class StreamFormat:
    """How a file's bytes become records: `text_line_format()`, a `str` per line."""

    def __init__(self, charset_name: str) -> None:
        self.charset_name = charset_name

    @staticmethod
    def text_line_format(charset_name: str = "UTF-8") -> StreamFormat:
        if charset_name.replace("-", "").replace("_", "").upper() != "UTF8":
            raise ConfigurationError(
                f"StreamFormat.text_line_format reads UTF-8 only, got {charset_name!r}"
            )
        return StreamFormat(charset_name)


class FileSource(_FileSource):
    """`barrierflow.connectors.files.FileSource`, made by PyFlink's builder."""

    @staticmethod
    def for_record_stream_format(stream_format: StreamFormat, *paths: str) -> FileSourceBuilder:
        if not isinstance(stream_format, StreamFormat):
            raise ConfigurationError(
                f"for_record_stream_format needs StreamFormat.text_line_format(), "
                f"got {stream_format!r}"
            )
        if len(paths) != 1:
            raise ConfigurationError(
                f"FileSource reads one path (a file or a folder), got {len(paths)}: {paths!r}"
            )
        return FileSourceBuilder(paths[0])

    @staticmethod
    def for_bulk_file_format(bulk_format: Any, *paths: str) -> FileSourceBuilder:
        raise ConfigurationError(
            "FileSource.for_bulk_file_format is not supported: read Parquet with "
            "barrierflow.connectors.files.ParquetSource"
        )


class FileSourceBuilder:
    """PyFlink's `FileSourceBuilder`: bounded unless `monitor_continuously`."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._interval_ms: int | None = None

    def monitor_continuously(self, discovery_interval: Duration | int) -> FileSourceBuilder:
        self._interval_ms = to_millis(discovery_interval, "monitor_continuously")
        return self

    def process_static_file_set(self) -> FileSourceBuilder:
        self._interval_ms = None
        return self

    def set_file_enumerator(self, file_enumerator: Any) -> FileSourceBuilder:
        """Accepted and unused: files are listed recursively, skipping hidden ones."""
        return self

    def set_split_assigner(self, split_assigner: Any) -> FileSourceBuilder:
        """Accepted and unused: each file is one split, dealt by name."""
        return self

    def build(self) -> FileSource:
        source = FileSource(os.fspath(self._path), TextLineFormat())
        if self._interval_ms is not None:
            return source.monitor_continuously(self._interval_ms)  # type: ignore[return-value]
        return source


# ---- sink --------------------------------------------------------------------------------

_NAME_PART = re.compile(r"^[A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class OutputFileConfig:
    """The part files' name prefix (default `part`) and suffix (default none)."""

    part_prefix: str = "part"
    part_suffix: str = ""

    def __post_init__(self) -> None:
        if not self.part_prefix or self.part_prefix.startswith((".", "_")):
            raise ConfigurationError(
                f"a part prefix must be a visible name, got {self.part_prefix!r}"
            )
        for what, value in (("prefix", self.part_prefix), ("suffix", self.part_suffix)):
            if not _NAME_PART.match(value):
                raise ConfigurationError(
                    f"a part {what} may hold letters, digits, '.', '_', '-', got {value!r}"
                )

    @staticmethod
    def builder() -> OutputFileConfig.OutputFileConfigBuilder:
        return OutputFileConfig.OutputFileConfigBuilder()

    def get_part_prefix(self) -> str:
        return self.part_prefix

    def get_part_suffix(self) -> str:
        return self.part_suffix

    class OutputFileConfigBuilder:
        def __init__(self) -> None:
            self._prefix = "part"
            self._suffix = ""

        def with_part_prefix(self, prefix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            self._prefix = prefix
            return self

        def with_part_suffix(self, suffix: str) -> OutputFileConfig.OutputFileConfigBuilder:
            self._suffix = suffix
            return self

        def build(self) -> OutputFileConfig:
            return OutputFileConfig(self._prefix, self._suffix)


class RollingPolicy(_RollingPolicy):
    """PyFlink's rolling policies over `files.RollingPolicy` (a part file always ends at a
    checkpoint).

    >>> RollingPolicy.default_rolling_policy(part_size=1024, rollover_interval=5_000)
    RollingPolicy(max_part_size=1024, rollover_interval_ms=5000)
    """

    @staticmethod
    def default_rolling_policy(
        part_size: int = 1024 * 1024 * 128,
        rollover_interval: int = 60 * 1000,
        inactivity_interval: int = 60 * 1000,
    ) -> RollingPolicy:
        """Roll at `part_size` bytes or `rollover_interval` ms of age; the inactivity
        interval is accepted and not used (the checkpoint closes an idle file)."""
        to_millis(inactivity_interval, "inactivity_interval")
        return RollingPolicy(part_size, to_millis(rollover_interval, "rollover_interval"))

    @staticmethod
    def on_checkpoint_rolling_policy() -> RollingPolicy:
        return RollingPolicy()


class BucketAssigner:
    """Which folder under the base path a record goes to: only the base path itself."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @staticmethod
    def base_path_bucket_assigner() -> BucketAssigner:
        return BucketAssigner("base_path")

    @staticmethod
    def date_time_bucket_assigner(
        format_str: str = "yyyy-MM-dd--HH", timezone_id: str | None = None
    ) -> BucketAssigner:
        raise ConfigurationError(
            "BucketAssigner.date_time_bucket_assigner is not supported (buckets by processing "
            "time are not replayable): use base_path_bucket_assigner(), or "
            "barrierflow.connectors.files.FileSink.for_rows(path).partition_by(...)"
        )


class _EncoderFormat(PartFileFormat):
    """Part files of an `Encoder`'s bytes, one record after the other."""

    def __init__(self, encoder: Encoder, prefix: str, suffix: str) -> None:
        self.encoder = encoder
        self.prefix = prefix
        self.extension = suffix

    def encode(self, rows: list[Any]) -> bytes:
        encode = self.encoder.encode
        return b"".join(encode(row) for row in rows)

    def open(self, stream: Any) -> PartFile:
        return ByteStreamPartFile(stream)

    def read(self, data: bytes) -> list[Any]:
        return data.decode(self.encoder.charset).splitlines()


class FileSink(_FileSink):
    """`barrierflow.connectors.files.FileSink` writing an `Encoder`'s lines, made by
    PyFlink's builder (`for_row_format(...)...build()`); exactly once. Records are written
    as Flink's `toString()` of the stream's declared type (`sink_to` hands it over)."""

    def with_declared_type(self, type_info: Any) -> FileSink:
        """This sink encoding records of `type_info` (DataStream.sink_to calls it)."""
        if not isinstance(self.format, _EncoderFormat):
            return self
        typed = copy.copy(self)
        encoder = self.format.encoder.for_type(type_info)
        typed.format = _EncoderFormat(encoder, self.format.prefix, self.format.extension)
        return typed

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> FileSink.RowFormatBuilder:
        if not isinstance(encoder, Encoder):
            raise ConfigurationError(
                f"for_row_format needs an Encoder (Encoder.simple_string_encoder()), "
                f"got {encoder!r}"
            )
        return FileSink.RowFormatBuilder(base_path, encoder)

    @staticmethod
    def for_bulk_format(base_path: str, writer_factory: Any) -> Any:
        raise ConfigurationError(
            "FileSink.for_bulk_format is not supported: write Parquet with "
            "barrierflow.connectors.files.FileSink.for_rows(path).with_format('parquet')"
        )

    class RowFormatBuilder:
        """PyFlink's row-format builder."""

        def __init__(self, base_path: str, encoder: Encoder) -> None:
            self._base_path = base_path
            self._encoder = encoder
            self._output_file_config = OutputFileConfig()
            self._rolling_policy: _RollingPolicy = RollingPolicy.default_rolling_policy()

        def with_bucket_check_interval(self, interval: int) -> FileSink.RowFormatBuilder:
            """Accepted: rolling by age is checked at each batch and each checkpoint."""
            to_millis(interval, "bucket check interval")
            return self

        def with_bucket_assigner(
            self, bucket_assigner: BucketAssigner
        ) -> FileSink.RowFormatBuilder:
            if not isinstance(bucket_assigner, BucketAssigner):
                raise ConfigurationError(
                    f"with_bucket_assigner needs a BucketAssigner, got {bucket_assigner!r}"
                )
            return self

        def with_output_file_config(self, config: OutputFileConfig) -> FileSink.RowFormatBuilder:
            if not isinstance(config, OutputFileConfig):
                raise ConfigurationError(
                    f"with_output_file_config needs an OutputFileConfig, got {config!r}"
                )
            self._output_file_config = config
            return self

        def with_rolling_policy(self, rolling_policy: _RollingPolicy) -> FileSink.RowFormatBuilder:
            if not isinstance(rolling_policy, _RollingPolicy):
                raise ConfigurationError(
                    f"with_rolling_policy needs a RollingPolicy, got {rolling_policy!r}"
                )
            self._rolling_policy = rolling_policy
            return self

        def enable_compact(self, strategy: Any, compactor: Any) -> FileSink.RowFormatBuilder:
            raise ConfigurationError(COMPACTION_REFUSED)

        def disable_compact(self) -> FileSink.RowFormatBuilder:
            return self

        def build(self) -> FileSink:
            sink = FileSink(os.fspath(self._base_path))
            config = self._output_file_config
            sink.format = _EncoderFormat(self._encoder, config.part_prefix, config.part_suffix)
            sink.rolling_policy = self._rolling_policy
            return sink
