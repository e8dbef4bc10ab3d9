"""PyFlink DataStream names barrierflow accepts but ignores, or refuses when the job is built,
with why: data for `barrierflow port` (it lists those a file uses, imported names and method
calls alike) and docs/porting.md (its tables; tests/porting/test_porting_table.py keeps them in
step). A PyFlink name in neither is supported when barrierflow has it, missing otherwise."""

from __future__ import annotations

__all__ = ["IGNORED", "REFUSED"]

_NO_JAVA = (
    "barrierflow runs no Java code of a job: Flink's jars hold Java connectors and formats, "
    "each PyFlink connector's counterpart here is Python; a warning names what was ignored"
)
_NO_SLOTS = (
    "each subtask is one Spark task holding a task slot of its own and Spark places the "
    "tasks, so there is nothing to share or separate; the group is kept as a name"
)

IGNORED: dict[str, str] = {
    "add_jars": _NO_JAVA,
    "add_classpaths": _NO_JAVA,
    "slot_sharing_group": _NO_SLOTS,
    "SlotSharingGroup": _NO_SLOTS,
    "InputDependencyConstraint": (
        "a batch scheduling hint Flink 2 no longer reads; barrierflow starts every task of a "
        "job at once (one Spark barrier stage)"
    ),
    "FileEnumeratorProvider": (
        "FileSource lists its path recursively, skipping hidden files, one split per file "
        "(the records are the same); set_file_enumerator accepts it"
    ),
    "FileSplitAssignerProvider": (
        "FileSource deals its splits by name and Spark places the tasks, so there is no "
        "locality to prefer; set_split_assigner accepts it"
    ),
}
"""Name -> why barrierflow accepts it and it changes nothing here."""

_SOURCE_FUNCTION = (
    "JobDefinitionError at add_source: add_source needs a barrierflow Source (FileSource, "
    "DataGeneratorSource, ...), got SourceFunction: a PyFlink SourceFunction or SinkFunction "
    "wraps Java code, which barrierflow cannot run (docs/porting.md names each connector's "
    "counterpart)"
)
_SINK_FUNCTION = (
    "JobDefinitionError at add_sink: add_sink needs a barrierflow Sink (FileSink, ...), got "
    "SinkFunction: a PyFlink SourceFunction or SinkFunction wraps Java code, which barrierflow "
    "cannot run (docs/porting.md names each connector's counterpart)"
)
_COMPACTION = (
    "ConfigurationError at enable_compact: FileSink compaction (enable_compact) is not "
    "supported: barrierflow publishes each part file at a checkpoint and merges none; roll "
    "fewer, larger files with RollingPolicy.default_rolling_policy(part_size=..., "
    "rollover_interval=...)"
)
_KAFKA_PRODUCER = (
    "JobDefinitionError when constructed: FlinkKafkaProducer is Flink's legacy Java sink "
    "function, which barrierflow cannot run: use KafkaSink.builder()"
    "...set_delivery_guarantee(DeliveryGuarantee...).build() with sink_to"
)

REFUSED: dict[str, str] = {
    "set_python_requirements": (
        "ConfigurationError: barrierflow does not install packages on the executors; install "
        "them in the executors' Python, or pack an environment and ship it with "
        "add_python_archive (--archives)"
    ),
    "SourceFunction": _SOURCE_FUNCTION,
    "SinkFunction": _SINK_FUNCTION,
    "CustomCheckpointStorage": (
        "JobDefinitionError when constructed: CustomCheckpointStorage wraps a Java "
        "CheckpointStorage, which barrierflow cannot run: use FileSystemCheckpointStorage(path) "
        "or set_checkpoint_storage_dir(path)"
    ),
    "CustomStateBackend": (
        "JobDefinitionError when constructed: CustomStateBackend wraps a Java state backend, "
        "which barrierflow cannot run: use HashMapStateBackend() or "
        "EmbeddedRocksDBStateBackend()"
    ),
    "AssignerWithPeriodicWatermarksWrapper": (
        "JobDefinitionError when constructed: AssignerWithPeriodicWatermarksWrapper wraps a "
        "Java watermark assigner, which barrierflow cannot run: use "
        "WatermarkStrategy.for_bounded_out_of_orderness(...).with_timestamp_assigner(...)"
    ),
    "BulkWriterFactory": (
        "JobDefinitionError when constructed: BulkWriterFactory wraps a Java bulk writer, which "
        "barrierflow cannot run: write Parquet with "
        "barrierflow.connectors.files.FileSink.for_rows(path).with_format('parquet')"
    ),
    "BulkFormat": (
        "JobDefinitionError when constructed: BulkFormat wraps a Java reader format, which "
        "barrierflow cannot run: read Parquet with barrierflow.connectors.files.ParquetSource"
    ),
    "StreamingFileSink": (
        "JobDefinitionError at for_row_format/for_bulk_format: StreamingFileSink is Flink's "
        "legacy Java sink function, which barrierflow cannot run: use "
        "FileSink.for_row_format(path, encoder).build() with sink_to"
    ),
    "FileCompactStrategy": _COMPACTION,
    "FileCompactor": _COMPACTION,
    "FlinkKafkaConsumer": (
        "JobDefinitionError when constructed: FlinkKafkaConsumer is Flink's legacy Java source "
        "function, which barrierflow cannot run: use KafkaSource.builder()...build() with "
        "env.from_source"
    ),
    "FlinkKafkaProducer": _KAFKA_PRODUCER,
    "Semantic": _KAFKA_PRODUCER.replace(
        "when constructed", "when FlinkKafkaProducer is constructed"
    ),
}
"""Name -> the error a user gets when the job is built."""
