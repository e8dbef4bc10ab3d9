"""Event time of sources whose readers read their splits one after another (files, row
groups, an events file's byte ranges): a split not begun yet does not hold the watermark
back, so the watermark follows the reading through each split instead of waiting for the
last one (Flink's FileSource hands a reader one split at a time), and no record comes
after a watermark past it. Real files, read through the SourceOperator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.clocks import ManualClock
from support.operator_harness import fire_due, started_source

from barrierflow import Duration, WatermarkStrategy
from barrierflow.connectors.base import Source
from barrierflow.connectors.files import FileSource
from barrierflow.connectors.files._parquet_source import ParquetSource
from barrierflow.nexmark.events_file import write_events
from barrierflow.nexmark.generator import GeneratorConfig
from barrierflow.nexmark.job import nexmark_watermarks
from barrierflow.nexmark.source import NexmarkFileSource
from barrierflow.runtime.elements import MAX_WATERMARK
from barrierflow.runtime.operators.source_sink import SourceOperator

FILES, ROWS = 4, 300


def by_field(name: str) -> WatermarkStrategy:
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(0)
    ).with_timestamp_assigner(lambda row, _: row[name])


def json_lines(folder: Path) -> tuple[Source, WatermarkStrategy]:
    for f in range(FILES):
        rows = (f'{{"t": {1_000 * (f * ROWS + i)}}}\n' for i in range(ROWS))
        (folder / f"part-{f}.jsonl").write_text("".join(rows))
    return FileSource.for_json_lines(str(folder)), by_field("t")


def parquet(folder: Path) -> tuple[Source, WatermarkStrategy]:
    for f in range(FILES):
        times = [1_000 * (f * ROWS + i) for i in range(ROWS)]
        pq.write_table(pa.table({"t": times}), folder / f"part-{f}.parquet")
    return ParquetSource(folder, converter=pa.RecordBatch.to_pylist), by_field("t")


def events_file(folder: Path) -> tuple[Source, WatermarkStrategy]:
    write_events(folder / "events.jsonl", GeneratorConfig(), FILES * ROWS)
    return NexmarkFileSource(folder / "events.jsonl", min_splits=FILES), nexmark_watermarks()


@pytest.mark.parametrize("make", [json_lines, parquet, events_file])
def test_the_watermark_follows_each_split_as_it_is_read(tmp_path, make):
    source, strategy = make(tmp_path)
    assert len(source.create_splits()) == FILES
    clock = ManualClock()
    operator, output = started_source(source, clock, strategy=strategy, interval_ms=100)
    emitted: list[tuple[Any, ...]] = []
    while operator.emit_next(50) != SourceOperator.END_OF_INPUT:
        clock.advance(100)
        fire_due(operator, clock)
        emitted += output.take()
    emitted += output.take()

    records = [event for event in emitted if event[0] == "record"]
    assert len(records) == FILES * ROWS
    first_watermark = next(i for i, event in enumerate(emitted) if event[0] == "watermark")
    read_before = sum(1 for event in emitted[:first_watermark] if event[0] == "record")
    assert read_before <= ROWS, f"no watermark until {read_before} records were read"
    watermark = None
    for event in emitted:
        if event[0] == "watermark":
            assert watermark is None or event[1] > watermark
            watermark = event[1]
        elif event[0] == "record":
            assert watermark is None or event[2] > watermark, f"late: {event} after {watermark}"
    assert emitted[-1] == ("watermark", MAX_WATERMARK)
    assert not [event for event in emitted if event[0] == "status"], "never idle between splits"
