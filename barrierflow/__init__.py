"""barrierflow: Apache Flink's exactly-once stream processing for Python, on Apache Spark."""

from barrierflow.api.all_windowed_stream import AllWindowedStream
from barrierflow.api.async_data_stream import AsyncDataStream
from barrierflow.api.broadcast_stream import BroadcastConnectedStream, BroadcastStream
from barrierflow.api.checkpoint_config import (
    CheckpointConfig,
    CheckpointingMode,
    ExternalizedCheckpointRetention,
)
from barrierflow.api.configuration import Configuration
from barrierflow.api.connected_streams import ConnectedStreams
from barrierflow.api.datastream import DataStream, DataStreamSink, KeyedStream
from barrierflow.api.environment import (
    JobClient,
    JobExecutionResult,
    JobStatus,
    StreamExecutionEnvironment,
)
from barrierflow.api.execution_config import ExecutionConfig
from barrierflow.api.joins import CoGroupedStreams, JoinedStreams
from barrierflow.api.windowed_stream import WindowedStream
from barrierflow.core import async_retry_predicates as async_retry_predicates
from barrierflow.core.async_function import AsyncFunction
from barrierflow.core.broadcast_functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from barrierflow.core.checkpoint_storage import (
    CheckpointStorage,
    CustomCheckpointStorage,
    FileSystemCheckpointStorage,
    JobManagerCheckpointStorage,
)
from barrierflow.core.co_functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
)
from barrierflow.core.completable_future import CompletableFuture
from barrierflow.core.config_options import ConfigOption, ConfigOptions
from barrierflow.core.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    TimeDomain,
    TimerService,
)
from barrierflow.core.input_dependency_constraint import InputDependencyConstraint
from barrierflow.core.java_wrappers import AssignerWithPeriodicWatermarksWrapper, CustomStateBackend
from barrierflow.core.job_id import JobID
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.restart_strategies import RestartStrategies, RestartStrategyConfiguration
from barrierflow.core.rocksdb_profiles import PredefinedOptions
from barrierflow.core.row import Row, RowKind
from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode
from barrierflow.core.slot_sharing_group import MemorySize, SlotSharingGroup
from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.core.time import Duration, Instant, Time
from barrierflow.core.type_serializer import TypeSerializer
from barrierflow.core.typeinfo import TypeInformation, Types
from barrierflow.core.watermark_strategy import TimestampAssigner, WatermarkStrategy
from barrierflow.core.window_functions import (
    AggregateFunction,
    ProcessWindowFunction,
    WindowFunction,
)
from barrierflow.core.windows.assigners import MergingWindowAssigner, WindowAssigner
from barrierflow.core.windows.triggers import Trigger, TriggerResult
from barrierflow.core.windows.window import CountWindow, GlobalWindow, TimeWindow, Window
from barrierflow.runtime.async_io.retry import AsyncRetryPredicate, AsyncRetryStrategy
from barrierflow.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)

__all__ = [
    "AggregateFunction",
    "AllWindowedStream",
    "AssignerWithPeriodicWatermarksWrapper",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "ByteArraySchema",
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoGroupedStreams",
    "CoMapFunction",
    "CoProcessFunction",
    "CompletableFuture",
    "ConfigOption",
    "ConfigOptions",
    "Configuration",
    "ConnectedStreams",
    "CountWindow",
    "CustomCheckpointStorage",
    "CustomStateBackend",
    "DataStream",
    "DataStreamSink",
    "DeserializationSchema",
    "Duration",
    "EmbeddedRocksDBStateBackend",
    "Encoder",
    "ExecutionConfig",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "FilterFunction",
    "FlatMapFunction",
    "GlobalWindow",
    "HashMapStateBackend",
    "InputDependencyConstraint",
    "Instant",
    "JobClient",
    "JobExecutionResult",
    "JobID",
    "JobManagerCheckpointStorage",
    "JobStatus",
    "JoinedStreams",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "MemorySize",
    "MergingWindowAssigner",
    "OutputTag",
    "Partitioner",
    "PredefinedOptions",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "Row",
    "RowKind",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SerializationSchema",
    "SimpleStringSchema",
    "SinkFunction",
    "SlotSharingGroup",
    "SourceFunction",
    "StateBackend",
    "StreamExecutionEnvironment",
    "Time",
    "TimeDomain",
    "TimeWindow",
    "TimerService",
    "TimestampAssigner",
    "Trigger",
    "TriggerResult",
    "TypeInformation",
    "TypeSerializer",
    "Types",
    "WatermarkStrategy",
    "Window",
    "WindowAssigner",
    "WindowFunction",
    "WindowedStream",
]
