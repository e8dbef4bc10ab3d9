"""PyFlink's names at PyFlink's paths under the porting rule (issue 24 items 2, 3, 18, 20):
`pyflink.common[.typeinfo|.time|.types|.watermark_strategy]` and `pyflink.datastream` ->
`barrierflow`; `pyflink.common.X` -> `barrierflow.X`; `pyflink.datastream.functions|state|
window|connectors[.X]` -> `barrierflow.functions|state|window|connectors[.X]`. The table lists
each PyFlink module's exported names that barrierflow has (recorded from PyFlink 2.3's
`__all__`); the comment after each lists the ones it does not have yet."""

from __future__ import annotations

import importlib

import pytest

PYFLINK_NAMES = {
    "pyflink.common": (
        "barrierflow",
        [
            "Configuration",
            "ExecutionConfig",
            "TypeInformation",
            "Types",
            "SerializationSchema",
            "DeserializationSchema",
            "SimpleStringSchema",
            "ByteArraySchema",
            "Encoder",
            "JobClient",
            "JobExecutionResult",
            "JobStatus",
            "RestartStrategies",
            "Row",
            "RowKind",
            "WatermarkStrategy",
            "Duration",
            "Instant",
            "Time",
            "ConfigOption",
            "ConfigOptions",
            "TypeSerializer",
            "CompletableFuture",
            "InputDependencyConstraint",
            "JobID",
            "RestartStrategyConfiguration",
            "AssignerWithPeriodicWatermarksWrapper",
        ],
    ),
    # not here: -
    "pyflink.datastream": (
        "barrierflow",
        [
            "StreamExecutionEnvironment",
            "DataStream",
            "KeyedStream",
            "WindowedStream",
            "ConnectedStreams",
            "BroadcastStream",
            "BroadcastConnectedStream",
            "AsyncDataStream",
            "DataStreamSink",
            "MapFunction",
            "CoMapFunction",
            "FlatMapFunction",
            "CoFlatMapFunction",
            "ReduceFunction",
            "FilterFunction",
            "ProcessFunction",
            "KeyedProcessFunction",
            "CoProcessFunction",
            "KeyedCoProcessFunction",
            "WindowFunction",
            "ProcessWindowFunction",
            "AggregateFunction",
            "BroadcastProcessFunction",
            "KeyedBroadcastProcessFunction",
            "AsyncFunction",
            "RuntimeContext",
            "TimerService",
            "CheckpointingMode",
            "CheckpointConfig",
            "ExternalizedCheckpointRetention",
            "StateBackend",
            "HashMapStateBackend",
            "EmbeddedRocksDBStateBackend",
            "RuntimeExecutionMode",
            "Window",
            "TimeWindow",
            "CountWindow",
            "GlobalWindow",
            "WindowAssigner",
            "MergingWindowAssigner",
            "TriggerResult",
            "Trigger",
            "TimeDomain",
            "KeySelector",
            "Partitioner",
            "OutputTag",
            "AsyncRetryPredicate",
            "AsyncRetryStrategy",
            "CustomStateBackend",
            "PredefinedOptions",
            "CheckpointStorage",
            "JobManagerCheckpointStorage",
            "FileSystemCheckpointStorage",
            "CustomCheckpointStorage",
            "SourceFunction",
            "SinkFunction",
            "SlotSharingGroup",
            "MemorySize",
        ],
    ),
    # not here: -
    "pyflink.common.typeinfo": (
        "barrierflow",
        [
            "TypeInformation",
            "Types",
        ],
    ),
    # not here: -
    "pyflink.common.time": (
        "barrierflow",
        [
            "Duration",
            "Instant",
            "Time",
        ],
    ),
    # not here: -
    "pyflink.common.watermark_strategy": (
        "barrierflow",
        [
            "WatermarkStrategy",
            "TimestampAssigner",
            "AssignerWithPeriodicWatermarksWrapper",
        ],
    ),
    # not here: -
    "pyflink.common.types": (
        "barrierflow",
        [
            "Row",
            "RowKind",
        ],
    ),
    # not here: -
    "pyflink.common.serialization": (
        "barrierflow.serialization",
        [
            "SerializationSchema",
            "DeserializationSchema",
            "SimpleStringSchema",
            "ByteArraySchema",
            "Encoder",
            "RowFieldExtractorSchema",
            "BulkWriterFactory",
        ],
    ),
    # not here: -
    "pyflink.datastream.functions": (
        "barrierflow.functions",
        [
            "RuntimeContext",
            "MapFunction",
            "CoMapFunction",
            "FlatMapFunction",
            "CoFlatMapFunction",
            "ReduceFunction",
            "AggregateFunction",
            "KeySelector",
            "FilterFunction",
            "Partitioner",
            "ProcessFunction",
            "CoProcessFunction",
            "KeyedProcessFunction",
            "KeyedCoProcessFunction",
            "TimerService",
            "WindowFunction",
            "AllWindowFunction",
            "ProcessWindowFunction",
            "ProcessAllWindowFunction",
            "BroadcastProcessFunction",
            "KeyedBroadcastProcessFunction",
            "AsyncFunction",
            "AsyncRetryPredicate",
            "AsyncRetryStrategy",
            "SourceFunction",
            "SinkFunction",
            "AsyncFunctionDescriptor",
            "BaseBroadcastProcessFunction",
        ],
    ),
    # not here: -
    "pyflink.datastream.state": (
        "barrierflow.state",
        [
            "ValueStateDescriptor",
            "ValueState",
            "ListStateDescriptor",
            "ListState",
            "MapStateDescriptor",
            "MapState",
            "ReducingStateDescriptor",
            "ReducingState",
            "AggregatingStateDescriptor",
            "AggregatingState",
            "ReadOnlyBroadcastState",
            "BroadcastState",
            "StateTtlConfig",
            "OperatorStateStore",
        ],
    ),
    # not here: -
    "pyflink.datastream.window": (
        "barrierflow.window",
        [
            "Window",
            "TimeWindow",
            "CountWindow",
            "GlobalWindow",
            "WindowAssigner",
            "TumblingProcessingTimeWindows",
            "TumblingEventTimeWindows",
            "SlidingProcessingTimeWindows",
            "SlidingEventTimeWindows",
            "ProcessingTimeSessionWindows",
            "EventTimeSessionWindows",
            "DynamicProcessingTimeSessionWindows",
            "DynamicEventTimeSessionWindows",
            "GlobalWindows",
            "MergingWindowAssigner",
            "CountTumblingWindowAssigner",
            "CountSlidingWindowAssigner",
            "TriggerResult",
            "Trigger",
            "EventTimeTrigger",
            "ProcessingTimeTrigger",
            "ContinuousEventTimeTrigger",
            "ContinuousProcessingTimeTrigger",
            "NeverTrigger",
            "PurgingTrigger",
            "CountTrigger",
            "SessionWindowTimeGapExtractor",
            "TimeWindowSerializer",
            "CountWindowSerializer",
            "GlobalWindowSerializer",
        ],
    ),
    # not here: -
    "pyflink.datastream.connectors": (
        "barrierflow.connectors",
        [
            "Sink",
            "Source",
            "DeliveryGuarantee",
        ],
    ),
    # not here: -
    "pyflink.datastream.connectors.file_system": (
        "barrierflow.connectors.file_system",
        [
            "OutputFileConfig",
            "FileSource",
            "FileSourceBuilder",
            "FileSink",
            "StreamFormat",
            "RollingPolicy",
            "BucketAssigner",
            "FileCompactor",
            "FileCompactStrategy",
            "StreamingFileSink",
            "BulkFormat",
            "FileEnumeratorProvider",
            "FileSplitAssignerProvider",
        ],
    ),
    # not here: -
    "pyflink.datastream.connectors.kafka": (
        "barrierflow.connectors.kafka",
        ["KafkaSource", "KafkaSink", "FlinkKafkaConsumer", "FlinkKafkaProducer", "Semantic"],
    ),
    "pyflink.datastream.connectors.number_seq": (
        "barrierflow.connectors.number_seq",
        ["NumberSequenceSource"],
    ),
}


def _cases() -> list[tuple[str, str, str]]:
    return [
        (pyflink, home, name) for pyflink, (home, names) in PYFLINK_NAMES.items() for name in names
    ]


@pytest.mark.parametrize(("pyflink_module", "home", "name"), _cases())
def test_a_pyflink_name_imports_from_its_ported_path(pyflink_module, home, name):
    assert hasattr(importlib.import_module(home), name), f"{pyflink_module}.{name} -> {home}"


def test_the_same_class_behind_every_path_it_has():
    import barrierflow
    import barrierflow.functions as functions
    import barrierflow.window as window

    for name in ("MapFunction", "ProcessWindowFunction", "KeySelector", "RuntimeContext"):
        assert getattr(barrierflow, name) is getattr(functions, name)
    for name in ("TimeWindow", "Trigger", "WindowAssigner", "GlobalWindow"):
        assert getattr(barrierflow, name) is getattr(window, name)
    import barrierflow.connectors.file_system as file_system
    import barrierflow.connectors.files as files

    for name in ("FileSink", "FileSource", "RollingPolicy"):  # PyFlink's path, the older one
        assert getattr(files, name) is getattr(file_system, name)
    assert type(files.FileSink.for_rows("out")) is file_system.FileSink


def test_async_retry_predicates_as_pyflink_has_them():
    from barrierflow import async_retry_predicates as predicates

    assert predicates.empty_result_predicate([]) and predicates.empty_result_predicate(None)
    assert not predicates.empty_result_predicate([1])
    assert predicates.has_exception_predicate(
        ValueError()
    ) and not predicates.has_exception_predicate(None)
    assert predicates.exception_type_predicate(KeyError("k"), LookupError)
    assert not predicates.exception_type_predicate(ValueError(), LookupError)


# -- generics (item 3) --------------------------------------------------------------------


def _generic_cases():
    from barrierflow.functions import (
        AggregateFunction,
        CoProcessFunction,
        FlatMapFunction,
        KeyedProcessFunction,
        MapFunction,
        ProcessWindowFunction,
        ReduceFunction,
        WindowFunction,
    )
    from barrierflow.state import ValueState
    from barrierflow.window import (
        EventTimeTrigger,
        TimeWindow,
        Trigger,
        TumblingEventTimeWindows,
        WindowAssigner,
    )

    return [
        (ProcessWindowFunction, (tuple, tuple, str, TimeWindow)),
        (WindowFunction, (tuple, tuple, str, TimeWindow)),
        (KeyedProcessFunction, (str, tuple, str)),
        (MapFunction, (int, str)),
        (FlatMapFunction, (int, str)),
        (ReduceFunction, (int,)),
        (AggregateFunction, (int, list, int)),
        (CoProcessFunction, (int, str, str)),
        (Trigger, (tuple, TimeWindow)),
        (EventTimeTrigger, (tuple, TimeWindow)),
        (WindowAssigner, (tuple, TimeWindow)),
        (TumblingEventTimeWindows, (tuple, TimeWindow)),
        (TimeWindow, ()),
        (ValueState, (int,)),
    ]


@pytest.mark.parametrize(
    ("cls", "params"), _generic_cases(), ids=lambda v: getattr(v, "__name__", "")
)
def test_a_class_pyflink_makes_generic_can_be_subscripted_and_subclassed(cls, params):
    alias = cls[params] if params else cls[int]
    assert alias.__origin__ is cls

    class Mine(alias):  # type: ignore[misc, valid-type]
        pass

    assert issubclass(Mine, cls)


# -- items 12 and 18 -----------------------------------------------------------------------


def test_state_ttl_from_pyflink_paths_on_descriptors_with_declared_types():
    from barrierflow import Time, Types
    from barrierflow.state import (
        ListStateDescriptor,
        MapStateDescriptor,
        StateTtlConfig,
        ValueStateDescriptor,
    )

    ttl = (
        StateTtlConfig.new_builder(Time.seconds(1))
        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
        .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        .cleanup_full_snapshot()
        .build()
    )
    assert ttl.get_ttl().to_milliseconds() == 1_000
    for descriptor in (
        ValueStateDescriptor("v", Types.INT()),
        ListStateDescriptor("l", Types.STRING()),
        MapStateDescriptor("m", Types.STRING(), Types.LONG()),
    ):
        descriptor.enable_time_to_live(ttl)
        assert descriptor.ttl_config is ttl


def test_number_sequence_source_at_pyflink_path_is_the_datagen_one():
    from barrierflow.connectors.datagen import NumberSequenceSource as Datagen
    from barrierflow.connectors.number_seq import NumberSequenceSource

    assert NumberSequenceSource is Datagen
    source = NumberSequenceSource(1, 5)
    reader = source.create_reader(source.create_splits())
    assert sorted(reader.poll_batch(10)) == [1, 2, 3, 4, 5]


def test_read_text_file_reads_each_line_once(tmp_path):
    from barrierflow import StreamExecutionEnvironment
    from barrierflow.errors import ConfigurationError

    (tmp_path / "a.txt").write_text("one\ntwo\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.read_text_file(str(tmp_path / "a.txt")).print()
    (source,) = [t.source for t in env._transformations if t.source is not None]
    reader = source.create_reader(source.create_splits())
    reader.restore({})
    assert (reader.poll_batch(10), source.bounded) == (["one", "two"], True)
    with pytest.raises(ConfigurationError, match="UTF-8 only"):
        env.read_text_file(str(tmp_path), "latin-1")


# -- ContinuousProcessingTimeTrigger (pyflink.datastream.window) ---------------------------


def fired(harness) -> list:
    """The records emitted since the last call, as (value, timestamp)."""
    return [
        (value, ts) for kind, value, ts in (e for e in harness.take_output() if e[0] == "record")
    ]


def test_continuous_processing_time_trigger_fires_at_each_aligned_interval():
    from barrierflow import Time
    from barrierflow.testing import WindowOperatorHarness
    from barrierflow.window import ContinuousProcessingTimeTrigger, TumblingEventTimeWindows

    harness = WindowOperatorHarness(
        TumblingEventTimeWindows.of(Time.seconds(100)),
        lambda r: r[0],
        reduce_function=lambda a, b: (a[0], a[1] + b[1]),
        trigger=ContinuousProcessingTimeTrigger.of(Time.milliseconds(10)),
        processing_time=3,
    )
    harness.process_element(("a", 1), 1)  # next fire at 10 (3 aligned down to 0, + 10)
    harness.set_processing_time(9)
    assert fired(harness) == []
    harness.process_element(("a", 2), 2)
    harness.set_processing_time(10)
    assert fired(harness) == [(("a", 3), 99_999)]
    harness.process_element(("a", 4), 3)
    harness.set_processing_time(19)
    assert fired(harness) == []
    harness.set_processing_time(20)  # fires again with everything so far (no purge)
    assert fired(harness) == [(("a", 7), 99_999)]
    harness.set_processing_time(35)  # fires at 30: one timer per interval, nothing new
    assert fired(harness) == [(("a", 7), 99_999)]


def test_continuous_processing_time_trigger_refuses_a_non_positive_interval():
    from barrierflow.errors import ConfigurationError
    from barrierflow.window import ContinuousProcessingTimeTrigger

    with pytest.raises(ConfigurationError, match="positive interval"):
        ContinuousProcessingTimeTrigger.of(0)
