"""Builds a Nexmark job: events with their timestamps and watermarks, one query, one sink.

The events come from an events file (`events_from_file`) or from the generator
(`events_from_generator`); either way the source itself assigns event time (each event's
`date_time`) and the watermark, which trails the largest `date_time` seen by 4 s, as
flink-nexmark's DDL declares (`WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND`).
The source's uid is "events" in both cases.
"""

from __future__ import annotations

import os

from barrierflow import DataStream, Duration, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink
from barrierflow.nexmark.generator import GeneratorConfig
from barrierflow.nexmark.queries import query
from barrierflow.nexmark.source import NexmarkFileSource, NexmarkSource

__all__ = [
    "EVENTS_UID",
    "WATERMARK_DELAY_MS",
    "events_from_file",
    "events_from_generator",
    "nexmark_watermarks",
    "query_output",
]

WATERMARK_DELAY_MS = 4_000
"""How far the watermark trails the largest event time seen (flink-nexmark's 4 s)."""
EVENTS_UID = "events"
"""The uid (and name) of the events source, whichever it is."""


def nexmark_watermarks() -> WatermarkStrategy:
    """The watermark 4 s behind the largest event time. The Nexmark sources give each event
    its `date_time` as its own timestamp (read from the Arrow column, no Python per event)."""
    return WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(WATERMARK_DELAY_MS))


def events_from_file(
    env: StreamExecutionEnvironment,
    path: str | os.PathLike[str],
    *,
    rate_per_reader: float | None = None,
) -> DataStream:
    """The events of an events file (JSON Lines or Parquet, see `events_file`), with event
    time, read in parallel (`NexmarkFileSource`); each source subtask at most
    `rate_per_reader` events/s if given."""
    source = NexmarkFileSource(path)
    if rate_per_reader is not None:
        source = source.with_rate_per_reader(rate_per_reader)
    return env.from_source(source, nexmark_watermarks(), EVENTS_UID).uid(EVENTS_UID)


def events_from_generator(
    env: StreamExecutionEnvironment,
    config: GeneratorConfig,
    count: int | None,
    events_per_second: float | None = None,
    start_at_ms: int | None = None,
) -> DataStream:
    """Generated events `0 .. count - 1` (endless if None), with event time; paced at
    `events_per_second` if given, from the wall-clock instant `start_at_ms` if given
    (`NexmarkSource`)."""
    source = NexmarkSource(
        config, count, events_per_second=events_per_second, start_at_ms=start_at_ms
    )
    return env.from_source(source, nexmark_watermarks(), EVENTS_UID).uid(EVENTS_UID)


def query_output(events: DataStream, name: str, output: str | None) -> DataStream:
    """Query `name` over `events`; its rows go to a FileSink (JSON Lines) in `output` if given."""
    results = query(name).build(events)
    if output is not None:
        results.sink_to(FileSink.for_rows(output)).uid(f"{name}-sink").name(f"{name} sink")
    return results
