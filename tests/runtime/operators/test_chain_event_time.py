"""Event time through a chain of operators, driven directly (no Spark): timestamps kept by
map/filter/flat_map/reduce, and assign_timestamps_and_watermarks mid-pipeline."""

from __future__ import annotations

from support.clocks import ManualClock
from support.operator_harness import context, fire_due, started

from barrierflow import Duration, WatermarkStrategy
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import ChainingOutput, CollectingOutput, OperatorOutput
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.operators.keyed import KeyedReduceOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator
from barrierflow.runtime.operators.timestamps_and_watermarks import (
    TimestampsAndWatermarksOperator,
)


def chain(*operators, clock=None, interval_ms=100):
    """Connect `operators` as a task does; returns the collecting output at the end."""
    clock = clock or ManualClock()
    tail = CollectingOutput()
    for index, operator in enumerate(operators):
        nxt = operators[index + 1] if index + 1 < len(operators) else None
        main = ChainingOutput(nxt) if nxt is not None else tail
        operator.setup(context(clock, interval_ms=interval_ms), OperatorOutput(main))
        operator.initialize_state(None)
        operator.open()
    return tail


def test_map_filter_and_flat_map_keep_each_records_timestamp():
    head = MapOperator("m", "m", lambda x: x * 10)
    tail = chain(
        head,
        FilterOperator("f", "f", lambda x: x != 20),
        FlatMapOperator("fm", "fm", lambda x: [x, x + 1]),
    )
    head.process_batch(RecordBatch([1, 2, 3], [100, 200, 300]))
    assert tail.take() == [
        ("record", 10, 100),
        ("record", 11, 100),
        ("record", 30, 300),
        ("record", 31, 300),
    ]


def test_a_watermark_passes_the_chain_after_the_records_before_it():
    head = MapOperator("m", "m", str)
    tail = chain(head, FlatMapOperator("fm", "fm", lambda x: [x]))
    head.process_batch(RecordBatch([1], [5]))
    head.process_watermark(Watermark(5))
    head.process_stream_status(StreamStatus.IDLE)
    assert tail.take() == [("record", "1", 5), ("watermark", 5), ("status", StreamStatus.IDLE)]


def test_a_keyed_reduce_keeps_the_timestamp_of_the_record_that_produced_each_result():
    reduce = KeyedReduceOperator("r", "r", lambda t: t[0], lambda a, b: (a[0], a[1] + b[1]))
    _, out = started(reduce, ManualClock())
    reduce.process_batch(RecordBatch([("a", 1), ("a", 2)], [10, 20]))
    reduce.process_watermark(Watermark(20))
    assert out.take() == [
        ("record", ("a", 1), 10),
        ("record", ("a", 3), 20),
        ("watermark", 20),
    ]


def timestamps_operator(clock, idleness=None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(5)
    ).with_timestamp_assigner(lambda value, record_timestamp: value)
    if idleness:
        strategy = strategy.with_idleness(Duration.of_millis(idleness))
    return started(TimestampsAndWatermarksOperator("tw", "tw", strategy), clock)


def test_assign_timestamps_replaces_timestamps_and_generates_its_own_watermarks():
    clock = ManualClock()
    operator, out = timestamps_operator(clock)
    operator.process_batch(RecordBatch([100, 90], [1, 2]))
    operator.process_watermark(Watermark(1_000))  # upstream watermarks are dropped
    operator.process_stream_status(StreamStatus.IDLE)  # and so are upstream statuses
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("record", 100, 100), ("record", 90, 90), ("watermark", 94)]


def test_assign_timestamps_passes_on_the_end_of_input_watermark():
    clock = ManualClock()
    operator, out = timestamps_operator(clock, idleness=100)
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("status", StreamStatus.IDLE)]
    operator.process_watermark(Watermark(MAX_WATERMARK))
    assert out.take() == [("status", StreamStatus.ACTIVE), ("watermark", MAX_WATERMARK)]
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == []
