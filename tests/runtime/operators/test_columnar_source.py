"""Sources that read Arrow: columnar batches out, event time from a column, a batch at a time.

Each test scripts a reader, drives the SourceOperator poll by poll with a manual clock and
asserts exactly what came out, comparing with the same records read as Python rows.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple

import pyarrow as pa
import pytest
from support.clocks import ManualClock
from support.operator_harness import ScriptedReader, ScriptedSource, fire_due, started

from barrierflow import Duration, WatermarkStrategy
from barrierflow.connectors.base import SplitBatch
from barrierflow.core.watermark_strategy import WatermarkGenerator
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.runtime.operators.timestamps_and_watermarks import (
    TimestampsAndWatermarksOperator,
)


class Bid(NamedTuple):
    auction: int
    ts: int


def to_bids(data: pa.RecordBatch) -> list[Any]:
    auctions, stamps = data["auction"].to_pylist(), data["ts"].to_pylist()
    return [Bid(*row) for row in zip(auctions, stamps, strict=True)]


class Collect:
    """An output that keeps the batches themselves (CollectingOutput flattens them)."""

    def __init__(self) -> None:
        self.batches: list[Any] = []
        self.events: list[Any] = []
        self.arrived_converted: list[bool] = []
        """Per columnar batch: whether its rows were already Python objects on arrival."""

    def collect(self, batch: Any) -> None:
        self.batches.append(batch)
        if type(batch) is ColumnarBatch:
            self.arrived_converted.append(batch.materialized)
        self.events.extend(("record", v, t) for v, t in batch.records())

    def collect_side(self, tag_id: str, batch: Any) -> None:
        raise AssertionError

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(("watermark", watermark.timestamp))

    def emit_stream_status(self, status: Any) -> None:
        self.events.append(("status", status))

    def emit_latency_marker(self, marker: Any) -> None:
        raise AssertionError


def run_source(script: list[SplitBatch], strategy: WatermarkStrategy) -> Collect:
    """Read the whole script, asking for a watermark after each poll."""
    clock = ManualClock()
    operator = SourceOperator("src", "src", ScriptedSource(ScriptedReader(["a"], script)), strategy)
    started(operator, clock, interval_ms=100)
    out = Collect()
    operator.output = out
    while operator.emit_next(100) != SourceOperator.END_OF_INPUT:
        clock.advance(100)
        fire_due(operator, clock)
    return out


ARROW = [
    pa.record_batch({"auction": [1, 2, 3], "ts": [1_000, 3_000, 2_000]}),
    pa.record_batch({"auction": [4], "ts": [2_500]}),
]
ROWS = [data.to_pylist() for data in ARROW]


def test_arrow_records_leave_as_columnar_batches_with_the_sources_converter() -> None:
    out = run_source(
        [SplitBatch("a", data, converter=to_bids) for data in ARROW],
        WatermarkStrategy.no_watermarks(),
    )
    assert [type(b) for b in out.batches] == [ColumnarBatch, ColumnarBatch]
    assert out.batches[0].data is ARROW[0]
    assert out.arrived_converted == [False, False]  # nothing read the rows
    assert [v for b in out.batches for v in b.values] == [
        Bid(1, 1_000),
        Bid(2, 3_000),
        Bid(3, 2_000),
        Bid(4, 2_500),
    ]


def test_a_timestamp_column_gives_the_same_records_and_watermarks_as_an_assigner() -> None:
    bounded = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
    by_column = run_source(
        [SplitBatch("a", data) for data in ARROW], bounded.with_timestamp_column("ts")
    )
    by_assigner = run_source(
        [SplitBatch("a", rows) for rows in ROWS],
        bounded.with_timestamp_assigner(lambda row, _: row["ts"]),
    )
    assert by_column.events == by_assigner.events
    assert by_column.events == [
        ("record", {"auction": 1, "ts": 1_000}, 1_000),
        ("record", {"auction": 2, "ts": 3_000}, 3_000),
        ("record", {"auction": 3, "ts": 2_000}, 2_000),
        ("watermark", 2_899),
        ("record", {"auction": 4, "ts": 2_500}, 2_500),
        ("watermark", MAX_WATERMARK),
    ]
    assert by_column.arrived_converted == [False, False]  # the column was read as Arrow


def test_a_timestamp_column_on_python_rows_reads_dicts_and_attributes() -> None:
    monotonous = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column("ts")
    dicts = run_source([SplitBatch("a", rows) for rows in ROWS], monotonous)
    tuples = run_source([SplitBatch("a", to_bids(data)) for data in ARROW], monotonous)
    assert [e[2] for e in dicts.events if e[0] == "record"] == [1_000, 3_000, 2_000, 2_500]
    assert [e for e in dicts.events if e[0] == "watermark"] == [
        e for e in tuples.events if e[0] == "watermark"
    ]
    assert [type(b) for b in dicts.batches] == [RecordBatch, RecordBatch]


def test_a_timestamp_function_and_timestamp_typed_columns() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    doubled = run_source(
        [SplitBatch("a", ARROW[0])],
        strategy.with_timestamp_column(lambda data: data["ts"].to_numpy() * 2),
    )
    assert [e[2] for e in doubled.events if e[0] == "record"] == [2_000, 6_000, 4_000]
    moments = pa.array([1_000_000, 2_500_999], pa.timestamp("us", "UTC"))
    typed = run_source(
        [SplitBatch("a", pa.record_batch({"at": moments}))],
        strategy.with_timestamp_column("at"),
    )
    assert [e[2] for e in typed.events if e[0] == "record"] == [1_000, 2_500]
    # The same moments as Python rows (datetimes) give the same timestamps.
    rows = run_source(
        [SplitBatch("a", [{"at": dt.datetime(1970, 1, 1, 0, 0, 2, 500_999, dt.UTC)}])],
        strategy.with_timestamp_column("at"),
    )
    assert [e[2] for e in rows.events if e[0] == "record"] == [2_500]


@pytest.mark.parametrize(
    ("data", "column", "error", "message"),
    [
        (pa.record_batch({"t": [1]}), "ts", KeyError, r"'ts' is not among .*\['t'\]"),
        (pa.record_batch({"ts": [1, None]}), "ts", ValueError, "1 null value"),
        (pa.record_batch({"ts": ["x"]}), "ts", TypeError, "of type string"),
        (pa.record_batch({"ts": [1, 2]}), lambda data: [1], ValueError, "returned 1 timestamps"),
    ],
)
def test_a_bad_timestamp_column_is_an_error_naming_it(data, column, error, message) -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column(column)
    with pytest.raises(error, match=message):
        run_source([SplitBatch("a", data)], strategy)


def test_a_custom_generator_still_sees_every_record() -> None:
    seen: list[tuple[Any, int]] = []

    class Punctuated(WatermarkGenerator):
        def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
            seen.append((event, event_timestamp))
            if event.auction % 2 == 0:
                output.emit_watermark(Watermark(event_timestamp))

        def on_periodic_emit(self, output: Any) -> None:
            pass

    out = run_source(
        [SplitBatch("a", data, converter=to_bids) for data in ARROW],
        WatermarkStrategy.for_generator(Punctuated).with_timestamp_column("ts"),
    )
    assert seen == [(Bid(1, 1_000), 1_000), (Bid(2, 3_000), 3_000), (Bid(3, 2_000), 2_000),
                    (Bid(4, 2_500), 2_500)]  # fmt: skip
    assert [e for e in out.events if e[0] == "watermark"] == [
        ("watermark", 3_000),
        ("watermark", MAX_WATERMARK),
    ]


def test_assign_timestamps_and_watermarks_takes_a_column_on_both_kinds_of_batch() -> None:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(0)
    ).with_timestamp_column("ts")
    results = []
    for batch in (ColumnarBatch(ARROW[0]), RecordBatch(ROWS[0])):
        clock = ManualClock()
        operator = TimestampsAndWatermarksOperator("tw", "tw", strategy)
        started(operator, clock, interval_ms=100)
        out = Collect()
        operator.output = out
        operator.process_batch(batch)
        clock.advance(100)
        fire_due(operator, clock)
        results.append(out.events)
        assert type(out.batches[0]) is type(batch)
    assert results[0] == results[1]
    assert results[0][-1] == ("watermark", 2_999)
