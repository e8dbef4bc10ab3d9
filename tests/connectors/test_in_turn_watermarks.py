"""Event time of a source whose reader reads its splits one after another in event-time
order (the Nexmark events file's byte ranges and row groups): a split not begun yet does
not hold the watermark back, so the watermark follows the reading through each split
instead of waiting for the last one (Flink's FileSource hands a reader one split at a
time), and no record comes after a watermark past it. Files whose time ranges overlap
(FileSource, ParquetSource) hold it back from the start: no record of a later file is
late. Real files, read through the SourceOperator."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.clocks import ManualClock
from support.operator_harness import fire_due, started_source

from barrierflow import Duration, WatermarkStrategy
from barrierflow.connectors.base import Source, SourceReader, SourceSplit
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


def events_file(folder: Path, parquet: bool) -> Source:
    path = folder / ("events.parquet" if parquet else "events.jsonl")
    config = GeneratorConfig(first_event_rate=100)  # 12 s of event time: 3 s a split
    write_events(path, config, FILES * ROWS, chunk_events=ROWS)
    return NexmarkFileSource(path, min_splits=FILES)


class Reversed(Source):
    """`source` with its splits handed to the reader last first."""

    def __init__(self, source: Source) -> None:
        self.source, self.bounded, self.dead_letters = source, source.bounded, False

    def create_splits(self) -> list[SourceSplit]:
        return self.source.create_splits()[::-1]

    def create_reader(self, splits: Sequence[SourceSplit]) -> SourceReader:
        return self.source.create_reader(splits)


def overlapping_json_lines(folder: Path) -> Source:
    """Files each covering the same time range (one per host, say)."""
    for f in range(FILES):
        rows = (f'{{"t": {1_000 * i + f}}}\n' for i in range(ROWS))
        (folder / f"host-{f}.jsonl").write_text("".join(rows))
    return FileSource.for_json_lines(str(folder))


def overlapping_parquet(folder: Path) -> Source:
    for f in range(FILES):
        pq.write_table(
            pa.table({"t": [1_000 * i + f for i in range(ROWS)]}), folder / f"host-{f}.parquet"
        )
    return ParquetSource(folder, converter=pa.RecordBatch.to_pylist)


def read_all(source: Source, strategy: WatermarkStrategy) -> list[tuple[Any, ...]]:
    """Everything the source operator emits reading `source` to its end, 50 records a poll,
    with a periodic watermark between polls."""
    assert len(source.create_splits()) == FILES
    clock = ManualClock()
    operator, output = started_source(source, clock, strategy=strategy, interval_ms=100)
    emitted: list[tuple[Any, ...]] = []
    while operator.emit_next(50) != SourceOperator.END_OF_INPUT:
        clock.advance(100)
        fire_due(operator, clock)
        emitted += output.take()
    return emitted + output.take()


@pytest.mark.parametrize("handed", ["in-order", "reversed"])
@pytest.mark.parametrize("parquet", [False, True], ids=["json-lines", "parquet"])
def test_the_watermark_follows_each_split_of_an_events_file_as_it_is_read(
    tmp_path, parquet, handed
):
    source = events_file(tmp_path, parquet)
    emitted = read_all(source if handed == "in-order" else Reversed(source), nexmark_watermarks())
    first_watermark = next(i for i, event in enumerate(emitted) if event[0] == "watermark")
    read_before = sum(1 for event in emitted[:first_watermark] if event[0] == "record")
    assert read_before <= ROWS, f"no watermark until {read_before} records were read"
    assert_in_order(emitted)


@pytest.mark.parametrize("make", [overlapping_json_lines, overlapping_parquet])
def test_files_whose_times_overlap_hold_the_watermark_back_so_nothing_is_late(tmp_path, make):
    assert_in_order(read_all(make(tmp_path), by_field("t")))


def assert_in_order(emitted: list[tuple[Any, ...]]) -> None:
    """Every record, then MAX_WATERMARK; watermarks rising, none before a record it passed;
    never idle."""
    records = [event for event in emitted if event[0] == "record"]
    assert len(records) == FILES * ROWS
    watermark = None
    for event in emitted:
        if event[0] == "watermark":
            assert watermark is None or event[1] > watermark
            watermark = event[1]
        elif event[0] == "record":
            assert watermark is None or event[2] > watermark, f"late: {event} after {watermark}"
    assert emitted[-1] == ("watermark", MAX_WATERMARK)
    assert not [event for event in emitted if event[0] == "status"], "never idle between splits"
