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
from barrierflow.core.co_functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
)
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
    TimeDomain,
    TimerService,
)
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.restart_strategies import RestartStrategies
from barrierflow.core.row import Row, RowKind
from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode
from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.core.time import Duration, Instant, Time
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
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "ByteArraySchema",
    "CheckpointConfig",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoGroupedStreams",
    "CoMapFunction",
    "CoProcessFunction",
    "Configuration",
    "ConnectedStreams",
    "CountWindow",
    "DataStream",
    "DataStreamSink",
    "DeserializationSchema",
    "Duration",
    "EmbeddedRocksDBStateBackend",
    "Encoder",
    "ExecutionConfig",
    "ExternalizedCheckpointRetention",
    "FilterFunction",
    "FlatMapFunction",
    "GlobalWindow",
    "HashMapStateBackend",
    "Instant",
    "JobClient",
    "JobExecutionResult",
    "JobStatus",
    "JoinedStreams",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "MergingWindowAssigner",
    "OutputTag",
    "Partitioner",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RestartStrategies",
    "Row",
    "RowKind",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SerializationSchema",
    "SimpleStringSchema",
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
    "Types",
    "WatermarkStrategy",
    "Window",
    "WindowAssigner",
    "WindowFunction",
    "WindowedStream",
]
