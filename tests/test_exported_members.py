"""The public import paths export exactly these names (PyFlink's, where the concept exists),
each in a sorted `__all__` and importable from there."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "barrierflow": {
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
    },
    "barrierflow.configuration": {"Configuration"},
    "barrierflow.connectors": {
        "DeliveryGuarantee",
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
    },
    "barrierflow.jobs": {
        "CheckpointStats",
        "CheckpointStatsStatus",
        "HistoryRecord",
        "JobCheckpoints",
        "JobEntry",
        "JobGraph",
        "JobRegistry",
        "JobStatus",
        "JobView",
        "MetricsSnapshot",
        "RetainedCheckpoint",
        "SinkCleanup",
        "SubtaskCheckpointStats",
        "SubtaskDecline",
        "checkpoint_summary",
        "clean_up_job_file",
        "format_bytes",
        "read_checkpoints",
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
        "BroadcastState",
        "ListState",
        "ListStateDescriptor",
        "MapState",
        "MapStateDescriptor",
        "OperatorStateStore",
        "ReadOnlyBroadcastState",
        "ReducingState",
        "ReducingStateDescriptor",
        "State",
        "StateDescriptor",
        "StateTtlConfig",
        "ValueState",
        "ValueStateDescriptor",
    },
    "barrierflow.serialization": {
        "BulkWriterFactory",
        "ByteArraySchema",
        "DeserializationSchema",
        "Encoder",
        "JsonRowDeserializationSchema",
        "JsonRowSerializationSchema",
        "RowFieldExtractorSchema",
        "SerializationSchema",
        "SimpleStringSchema",
    },
    "barrierflow.state_processor": {
        "BroadcastEntry",
        "BroadcastStateInfo",
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
    "barrierflow.testing": {
        "BroadcastProcessFunctionHarness",
        "CoProcessFunctionHarness",
        "FilterFunctionHarness",
        "FlatMapFunctionHarness",
        "HarnessSnapshot",
        "KeyedBroadcastProcessFunctionHarness",
        "KeyedCoProcessFunctionHarness",
        "KeyedFilterFunctionHarness",
        "KeyedFlatMapFunctionHarness",
        "KeyedHarness",
        "KeyedMapFunctionHarness",
        "KeyedProcessFunctionHarness",
        "MapFunctionHarness",
        "OperatorHarness",
        "ParallelHarness",
        "ProcessFunctionHarness",
        "UserFunctionError",
        "WindowOperatorHarness",
    },
    "barrierflow.window": {
        "ContinuousEventTimeTrigger",
        "ContinuousProcessingTimeTrigger",
        "CountSlidingWindowAssigner",
        "CountTrigger",
        "CountTumblingWindowAssigner",
        "CountWindow",
        "CountWindowSerializer",
        "DynamicEventTimeSessionWindows",
        "DynamicProcessingTimeSessionWindows",
        "EventTimeSessionWindows",
        "EventTimeTrigger",
        "GlobalWindow",
        "GlobalWindowSerializer",
        "GlobalWindows",
        "MAX_TIMESTAMP",
        "MergingWindowAssigner",
        "NeverTrigger",
        "ProcessingTimeSessionWindows",
        "ProcessingTimeTrigger",
        "PurgingTrigger",
        "SessionWindowTimeGapExtractor",
        "SlidingEventTimeWindows",
        "SlidingProcessingTimeWindows",
        "TimeWindow",
        "TimeWindowSerializer",
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


def connector_modules() -> list[str]:
    """Every public module of `barrierflow.connectors` (packages and modules whose own name
    has no leading underscore; a package's private modules are behind its `__all__`)."""
    import pkgutil

    import barrierflow.connectors as connectors

    names = ["barrierflow.connectors"]
    for info in pkgutil.walk_packages(connectors.__path__, "barrierflow.connectors."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def names_defined_in(module_name: str) -> set[str]:
    """The public names a module's own source defines at its top level (classes, functions,
    assignments), read with `ast`: what a reader of the file takes for its interface."""
    import ast

    module = importlib.import_module(module_name)
    tree = ast.parse(open(module.__file__, encoding="utf-8").read())  # noqa: SIM115
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_the_connector_modules_are_the_expected_ones():
    assert "barrierflow.connectors.postgres" in connector_modules()
    assert "barrierflow.connectors.files" in connector_modules()


@pytest.mark.parametrize("module_name", connector_modules())
def test_every_connector_module_has_a_sorted_all_of_names_it_has(module_name):
    module = importlib.import_module(module_name)
    assert hasattr(module, "__all__"), f"{module_name} has no __all__"
    assert module.__all__ == sorted(module.__all__, key=isort_order)
    assert [name for name in module.__all__ if not hasattr(module, name)] == []


@pytest.mark.parametrize("module_name", connector_modules())
def test_no_public_name_of_a_connector_module_is_missing_from_its_all(module_name):
    module = importlib.import_module(module_name)
    assert sorted(names_defined_in(module_name) - set(module.__all__)) == []
