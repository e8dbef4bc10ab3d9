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
from barrierflow.core.async_function import AsyncFunction
from barrierflow.core.broadcast_functions import (
    BroadcastProcessFunction,
    KeyedBroadcastProcessFunction,
)
from barrierflow.core.functions import TimeDomain
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.restart_strategies import RestartStrategies
from barrierflow.core.row import Row, RowKind
from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.core.time import Duration, Time
from barrierflow.core.typeinfo import TypeInformation, Types
from barrierflow.core.watermark_strategy import TimestampAssigner, WatermarkStrategy
from barrierflow.core.windows.window import CountWindow
from barrierflow.runtime.async_io.retry import AsyncRetryStrategy
from barrierflow.serialization import (
    ByteArraySchema,
    DeserializationSchema,
    Encoder,
    SerializationSchema,
    SimpleStringSchema,
)

__all__ = [
    "AllWindowedStream",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryStrategy",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "ByteArraySchema",
    "CheckpointConfig",
    "CheckpointingMode",
    "CoGroupedStreams",
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
    "HashMapStateBackend",
    "JobClient",
    "JobExecutionResult",
    "JobStatus",
    "JoinedStreams",
    "KeyedBroadcastProcessFunction",
    "KeyedStream",
    "OutputTag",
    "RestartStrategies",
    "Row",
    "RowKind",
    "SerializationSchema",
    "SimpleStringSchema",
    "StateBackend",
    "StreamExecutionEnvironment",
    "Time",
    "TimeDomain",
    "TimestampAssigner",
    "TypeInformation",
    "Types",
    "WatermarkStrategy",
    "WindowedStream",
]
