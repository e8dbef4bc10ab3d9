"""The public import paths export exactly these names (PyFlink's, where the concept exists),
each in a sorted `__all__` and importable from there."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "barrierflow": {
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
        "EmbeddedRocksDBStateBackend",
        "ExecutionConfig",
        "ExternalizedCheckpointRetention",
        "HashMapStateBackend",
        "JobClient",
        "JobExecutionResult",
        "JoinedStreams",
        "KeyedStream",
        "OutputTag",
        "RestartStrategies",
        "StateBackend",
        "StreamExecutionEnvironment",
        "TimeDomain",
        "TimestampAssigner",
        "WatermarkStrategy",
        "WindowedStream",
    },
    "barrierflow.connectors": {
        "Sink",
        "SinkContext",
        "SinkWriter",
        "Source",
        "SourceReader",
        "SourceSplit",
        "SplitBatch",
        "TwoPhaseCommitSink",
    },
    "barrierflow.nexmark": {
        "QUERY_NAMES",
        "Auction",
        "Bid",
        "GeneratorConfig",
        "NexmarkFileSource",
        "NexmarkSource",
        "Person",
        "Query",
        "RunReport",
        "RunSettings",
        "event_at",
        "events_from_file",
        "events_from_generator",
        "generate_events",
        "query",
        "run",
        "write_events",
    },
    "barrierflow.functions": {
        "AggregateFunction",
        "AllWindowFunction",
        "AsyncFunction",
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
        "KeyedCoProcessFunction",
        "KeyedBatchFunction",
        "KeyedProcessFunction",
        "KeyedStateStore",
        "MapFunction",
        "ProcessAllWindowFunction",
        "ProcessFunction",
        "ProcessJoinFunction",
        "ProcessWindowFunction",
        "ReduceFunction",
        "RuntimeContext",
        "TimeDomain",
        "TimerService",
        "WindowFunction",
    },
    "barrierflow.metrics": {
        "Counter",
        "Distribution",
        "Gauge",
        "Meter",
        "MetricGroup",
    },
    "barrierflow.state": {
        "AggregatingState",
        "AggregatingStateDescriptor",
        "ListState",
        "ListStateDescriptor",
        "MapState",
        "MapStateDescriptor",
        "OperatorStateStore",
        "ReducingState",
        "ReducingStateDescriptor",
        "State",
        "StateDescriptor",
        "StateTtlConfig",
        "Time",
        "ValueState",
        "ValueStateDescriptor",
    },
    "barrierflow.state_processor": {
        "KeyedEntry",
        "ListStateInfo",
        "OperatorInfo",
        "OperatorListEntry",
        "SavepointWriter",
        "Snapshot",
        "StateInfo",
        "StateReader",
        "TimerEntry",
        "load",
        "read",
    },
    "barrierflow.window": {
        "MAX_TIMESTAMP",
        "ContinuousEventTimeTrigger",
        "CountTrigger",
        "DynamicEventTimeSessionWindows",
        "DynamicProcessingTimeSessionWindows",
        "EventTimeSessionWindows",
        "EventTimeTrigger",
        "GlobalWindow",
        "GlobalWindows",
        "MergingWindowAssigner",
        "NeverTrigger",
        "ProcessingTimeSessionWindows",
        "ProcessingTimeTrigger",
        "PurgingTrigger",
        "SessionWindowTimeGapExtractor",
        "SlidingEventTimeWindows",
        "SlidingProcessingTimeWindows",
        "TimeWindow",
        "Trigger",
        "TriggerResult",
        "TumblingEventTimeWindows",
        "TumblingProcessingTimeWindows",
        "Window",
        "WindowAssigner",
    },
}


def isort_order(name: str) -> tuple[int, str]:
    """ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, name)


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_a_public_module_exports_exactly_its_public_names(module_name):
    module = importlib.import_module(module_name)
    assert set(module.__all__) == PUBLIC[module_name]


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_all_is_sorted_and_every_name_in_it_is_importable(module_name):
    module = importlib.import_module(module_name)
    assert module.__all__ == sorted(module.__all__, key=isort_order)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_the_function_classes_are_the_ones_the_operators_accept():
    import barrierflow
    import barrierflow.functions as functions
    from barrierflow.core.async_function import AsyncFunction
    from barrierflow.core.window_functions import ProcessWindowFunction

    assert functions.AsyncFunction is barrierflow.AsyncFunction is AsyncFunction
    assert functions.ProcessWindowFunction is ProcessWindowFunction
