"""The SourceOperator's event time, driven poll by poll with a manual clock (no Spark).

Each test feeds the operator a scripted reader, advances the clock, and asserts the
exact records, watermarks and statuses that come out, then that nothing else did.
"""

from __future__ import annotations

from support.clocks import ManualClock
from support.operator_harness import ScriptedReader, ScriptedSource, fire_due, started

from barrierflow import Duration, WatermarkStrategy
from barrierflow.connectors.base import SplitBatch
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus
from barrierflow.runtime.operators.source_sink import SourceOperator

IDLE, ACTIVE = StreamStatus.IDLE, StreamStatus.ACTIVE
MORE, NOTHING, END = (
    SourceOperator.MORE_AVAILABLE,
    SourceOperator.NOTHING_AVAILABLE,
    SourceOperator.END_OF_INPUT,
)


def bounded(millis: int) -> WatermarkStrategy:
    """Out-of-orderness `millis`; the event time is the second field of a record."""
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(millis)
    ).with_timestamp_assigner(lambda event, record_timestamp: event[1])


def source(split_ids, script, strategy, clock, interval_ms=100):
    operator = SourceOperator(
        "src", "src", ScriptedSource(ScriptedReader(split_ids, script)), strategy
    )
    started(operator, clock, interval_ms=interval_ms)
    return operator, operator.output


def batch(split_id, *events, finished=False):
    return SplitBatch(split_id, list(events), finished=finished)


def test_each_split_has_its_own_watermark_and_the_source_emits_their_minimum():
    clock = ManualClock()
    operator, out = source(
        ["a", "b"],
        [
            batch("a", ("x", 1_000), ("y", 900)),  # out of order within split a
            batch("b", ("z", 500)),
            batch("b", ("w", 2_000)),
        ],
        bounded(10),
        clock,
    )
    assert operator.emit_next(100) == MORE
    assert operator.emit_next(100) == MORE
    assert out.take() == [
        ("record", ("x", 1_000), 1_000),
        ("record", ("y", 900), 900),
        ("record", ("z", 500), 500),
    ]
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("watermark", 489)]  # min(1000 - 11, 500 - 11)

    assert operator.emit_next(100) == MORE
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("record", ("w", 2_000), 2_000), ("watermark", 989)]


def test_watermarks_are_asked_for_only_every_auto_watermark_interval():
    clock = ManualClock(1_000)
    operator, out = source(["a"], [batch("a", ("x", 50))], bounded(0), clock, interval_ms=200)
    operator.emit_next(100)
    out.take()
    assert operator.next_wakeup() == 1_200
    clock.advance(199)
    fire_due(operator, clock)
    assert out.take() == []
    clock.advance(1)
    fire_due(operator, clock)
    assert out.take() == [("watermark", 49)]
    assert operator.next_wakeup() == 1_400


def test_a_split_that_has_not_sent_anything_holds_the_watermark_back():
    clock = ManualClock()
    operator, out = source(["a", "b"], [batch("a", ("x", 1_000))], bounded(0), clock)
    operator.emit_next(100)
    out.take()
    for _ in range(5):
        clock.advance(100)
        fire_due(operator, clock)
    assert out.take() == []


def test_an_idle_split_does_not_hold_the_watermark_back():
    clock = ManualClock()
    strategy = bounded(0).with_idleness(Duration.of_millis(300))
    operator, out = source(["a", "b"], [batch("a", ("x", 1_000))], strategy, clock)
    operator.emit_next(100)
    assert out.take() == [("record", ("x", 1_000), 1_000)]

    clock.advance(100)  # b has been quiet for 100 ms: still holds the watermark back
    fire_due(operator, clock)
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == []

    clock.advance(100)  # b quiet for 300 ms: idle; a alone decides
    fire_due(operator, clock)
    assert out.take() == [("watermark", 999)]

    clock.advance(100)  # a quiet for 300 ms since its last event was seen: all idle
    fire_due(operator, clock)
    assert out.take() == [("status", IDLE)]


def test_a_split_that_comes_back_from_idle_makes_the_source_active_again():
    clock = ManualClock()
    strategy = bounded(0).with_idleness(Duration.of_millis(100))
    operator, out = source(["a"], [batch("a"), batch("a", ("late", 5_000))], strategy, clock)
    assert operator.emit_next(100) == NOTHING
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("status", IDLE)]
    operator.emit_next(100)
    assert out.take() == [("status", ACTIVE), ("record", ("late", 5_000), 5_000)]
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("watermark", 4_999)]


def test_a_finished_split_no_longer_holds_the_watermark_back():
    clock = ManualClock()
    operator, out = source(
        ["a", "b"],
        [batch("a", ("x", 100), finished=True), batch("b", ("y", 5_000))],
        bounded(0),
        clock,
    )
    operator.emit_next(100)
    operator.emit_next(100)
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [
        ("record", ("x", 100), 100),
        ("record", ("y", 5_000), 5_000),
        ("watermark", 4_999),
    ]


def test_the_end_of_input_emits_the_maximum_watermark_once():
    clock = ManualClock()
    operator, out = source(["a"], [batch("a", ("x", 10))], bounded(0), clock)
    assert operator.emit_next(100) == MORE
    assert operator.emit_next(100) == END
    assert out.take() == [("record", ("x", 10), 10), ("watermark", MAX_WATERMARK)]
    assert operator.next_wakeup() is None
    assert operator.emit_next(100) == END
    assert out.take() == []


def test_an_idle_source_becomes_active_before_its_maximum_watermark():
    clock = ManualClock()
    strategy = bounded(0).with_idleness(Duration.of_millis(100))
    operator, out = source(["a"], [batch("a")], strategy, clock)
    assert operator.emit_next(100) == NOTHING
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("status", IDLE)]
    assert operator.emit_next(100) == END
    assert out.take() == [("status", ACTIVE), ("watermark", MAX_WATERMARK)]


def test_a_subtask_without_splits_is_idle_until_its_input_ends():
    clock = ManualClock()
    operator, out = source([], [batch("elsewhere")], bounded(0), clock)
    assert operator.emit_next(100) == NOTHING
    assert out.take() == [("status", IDLE)]
    assert operator.emit_next(100) == END
    assert out.take() == [("status", ACTIVE), ("watermark", MAX_WATERMARK)]


def test_without_watermarks_records_keep_no_timestamp_and_only_the_end_emits_one():
    clock = ManualClock()
    operator, out = source(["a"], [batch("a", "p", "q")], WatermarkStrategy.no_watermarks(), clock)
    operator.emit_next(100)
    assert operator.next_wakeup() is None
    assert operator.emit_next(100) == END
    assert out.take() == [
        ("record", "p", None),
        ("record", "q", None),
        ("watermark", MAX_WATERMARK),
    ]


def test_the_readers_own_timestamps_reach_the_assigner_as_record_timestamps():
    clock = ManualClock()
    seen = []

    def assigner(event, record_timestamp):
        seen.append(record_timestamp)
        return record_timestamp + 1

    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(assigner)
    operator, out = source(["a"], [SplitBatch("a", ["p", "q"], [70, 80])], strategy, clock)
    operator.emit_next(100)
    assert seen == [70, 80]
    assert out.take() == [("record", "p", 71), ("record", "q", 81)]


def test_without_an_assigner_the_readers_timestamps_are_kept():
    clock = ManualClock()
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    operator, out = source(["a"], [SplitBatch("a", ["p"], [70])], strategy, clock)
    operator.emit_next(100)
    clock.advance(100)
    fire_due(operator, clock)
    assert out.take() == [("record", "p", 70), ("watermark", 69)]


def test_a_reader_without_split_ids_counts_as_one_split():
    from barrierflow.connectors.collection import CollectionSource

    clock = ManualClock()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda event, record_timestamp: event
    )
    operator = SourceOperator("src", "src", CollectionSource([3, 1, 2]), strategy)
    operator.assign_splits(CollectionSource([]).create_splits())
    started(operator, clock)
    out = operator.output
    assert operator.emit_next(100) == MORE
    assert operator.emit_next(100) == END
    assert out.take() == [
        ("record", 3, 3),
        ("record", 1, 1),
        ("record", 2, 2),
        ("watermark", MAX_WATERMARK),
    ]
