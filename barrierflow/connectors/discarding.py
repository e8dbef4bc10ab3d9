"""`DiscardingSink`: takes every record and keeps none (Flink's name; for benchmarks and tests).

Columnar records are dropped as Arrow: nothing turns them into Python rows, so a
benchmark ending in it measures the pipeline, not the sink. It counts what it dropped.

>>> from barrierflow.connectors.base import SinkContext
>>> writer = DiscardingSink().create_writer(SinkContext("out", 0, 1, 0, "run-0"))
>>> writer.write_batch(["a", "b"]); writer.records
2
"""

from __future__ import annotations

from typing import Any

from barrierflow.connectors.base import AtOnceSinkWriter, Sink, SinkContext

__all__ = [
    "DiscardingSink",
    "DiscardingSinkWriter",
]


class DiscardingSink(Sink):
    """Drops every record."""

    def create_writer(self, context: SinkContext) -> DiscardingSinkWriter:
        return DiscardingSinkWriter()


class DiscardingSinkWriter(AtOnceSinkWriter):
    """Counts the records it drops (`records`). Mailbox thread only."""

    def __init__(self) -> None:
        self.records = 0

    def write_batch(self, records: list[Any]) -> None:
        self.records += len(records)

    def write_arrow(self, data: Any) -> None:
        self.records += data.num_rows
