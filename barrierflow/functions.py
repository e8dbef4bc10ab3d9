"""User function classes (PyFlink names)."""

from barrierflow.api.all_windowed_stream import AllWindowFunction, ProcessAllWindowFunction
from barrierflow.core.async_function import AsyncFunction
from barrierflow.core.async_function_descriptor import AsyncFunctionDescriptor
from barrierflow.core.batch_functions import KeyedBatchFunction
from barrierflow.core.broadcast_functions import (
    BaseBroadcastProcessFunction,
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
    CheckpointedFunction,
    FilterFunction,
    FlatMapFunction,
    FunctionInitializationContext,
    FunctionSnapshotContext,
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
from barrierflow.core.join_functions import (
    CoGroupFunction,
    FlatJoinFunction,
    JoinFunction,
    ProcessJoinFunction,
)
from barrierflow.core.window_functions import (
    AggregateFunction,
    KeyedStateStore,
    ProcessWindowFunction,
    WindowFunction,
)
from barrierflow.runtime.async_io.retry import AsyncRetryPredicate, AsyncRetryStrategy

__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "AsyncFunction",
    "AsyncFunctionDescriptor",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "CheckpointedFunction",
    "CoFlatMapFunction",
    "CoGroupFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "FilterFunction",
    "FlatJoinFunction",
    "FlatMapFunction",
    "FunctionInitializationContext",
    "FunctionSnapshotContext",
    "JoinFunction",
    "KeySelector",
    "KeyedBatchFunction",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStateStore",
    "MapFunction",
    "Partitioner",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessJoinFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "SinkFunction",
    "SourceFunction",
    "TimeDomain",
    "TimerService",
    "WindowFunction",
]
