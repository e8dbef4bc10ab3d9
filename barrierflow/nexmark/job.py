"""Builds a Nexmark job: events with their timestamps and watermarks, one query, one sink.

The watermark trails the largest `date_time` seen by 4 s, as flink-nexmark's DDL declares
(`WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND`).
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream, Duration, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.nexmark.model import from_table_row
from barrierflow.nexmark.queries import query

__all__ = ["WATERMARK_DELAY_MS", "events_from_file", "nexmark_watermarks", "query_output"]

WATERMARK_DELAY_MS = 4_000
"""How far the watermark trails the largest event time seen (flink-nexmark's 4 s)."""


def nexmark_watermarks() -> WatermarkStrategy:
    """Event time from each event's `date_time`, the watermark 4 s behind the largest."""
    return WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(WATERMARK_DELAY_MS)
    ).with_timestamp_assigner(_date_time)


def events_from_file(env: StreamExecutionEnvironment, path: str) -> DataStream:
    """The events of a JSON Lines events file (flink-nexmark's table shape), with event time."""
    return (
        env.from_source(FileSource.for_json_lines(path), WatermarkStrategy.no_watermarks(), "events")
        .map(from_table_row)
        .uid("events-parse")
        .assign_timestamps_and_watermarks(nexmark_watermarks())
        .uid("events-time")
    )


def query_output(events: DataStream, name: str, output: str | None) -> DataStream:
    """Query `name` over `events`; its rows go to a FileSink (JSON Lines) in `output` if given."""
    results = query(name).build(events)
    if output is not None:
        results.sink_to(FileSink.for_rows(output)).uid(f"{name}-sink").name(f"{name} sink")
    return results


def _date_time(event: Any, record_timestamp: int) -> int:
    return event.date_time
