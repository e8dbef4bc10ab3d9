"""barrierflow: Apache Flink's exactly-once stream processing for Python, on Apache Spark."""

from barrierflow.api.all_windowed_stream import AllWindowedStream
from barrierflow.api.checkpoint_config import CheckpointConfig, CheckpointingMode
from barrierflow.api.connected_streams import ConnectedStreams
from barrierflow.api.datastream import DataStream, DataStreamSink, KeyedStream
from barrierflow.api.environment import JobClient, JobExecutionResult, StreamExecutionEnvironment
from barrierflow.api.execution_config import ExecutionConfig
from barrierflow.api.functions import TimeDomain
from barrierflow.api.output_tag import OutputTag
from barrierflow.api.restart_strategies import RestartStrategies
from barrierflow.api.time import Duration
from barrierflow.api.watermark_strategy import TimestampAssigner, WatermarkStrategy
from barrierflow.api.windowed_stream import WindowedStream
from barrierflow.runtime.async_io.api import AsyncDataStream, AsyncFunction
from barrierflow.runtime.async_io.retry import AsyncRetryStrategy
from barrierflow.runtime.joins.api import CoGroupedStreams, JoinedStreams

__all__ = [
    "AllWindowedStream",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncRetryStrategy",
    "CheckpointConfig",
    "CheckpointingMode",
    "CoGroupedStreams",
    "ConnectedStreams",
    "DataStream",
    "DataStreamSink",
    "Duration",
    "ExecutionConfig",
    "JobClient",
    "JobExecutionResult",
    "JoinedStreams",
    "KeyedStream",
    "OutputTag",
    "RestartStrategies",
    "StreamExecutionEnvironment",
    "TimeDomain",
    "TimestampAssigner",
    "WatermarkStrategy",
    "WindowedStream",
]
