"""A function chained to a source raises: the source remembers where the batch was read
(source, split, size, the reader's offset after it) for the task's failure report, so the
job's error names the record's position (issue 21, item 7). No Spark."""

from __future__ import annotations

import pytest
from support.clocks import ManualClock
from support.operator_harness import ScriptedReader, ScriptedSource, started

from barrierflow import WatermarkStrategy
from barrierflow.connectors.base import SplitBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.operators.source_sink import SourceOperator


class Offsets(ScriptedReader):
    """A scripted reader whose position of split 'a.txt' is the records read so far x 10."""

    def __init__(self, script: list[SplitBatch]) -> None:
        super().__init__(["a.txt"], script)
        self.read = 0

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        polled = super().poll_split_batch(max_records)
        if polled is not None:
            self.read += len(polled.records)
        return polled

    def snapshot(self) -> dict:
        return {"a.txt": self.read * 10}


class RaisingOn(CollectingOutput):
    """The chain after the source: raises on the record `bad`."""

    def __init__(self, bad) -> None:
        super().__init__()
        self.bad = bad

    def collect(self, batch) -> None:
        if self.bad in batch.values:
            raise ValueError(f"cannot parse {self.bad!r}")
        super().collect(batch)


def source_over(reader, timestamp_assigner=None) -> SourceOperator:
    strategy = WatermarkStrategy.no_watermarks()
    if timestamp_assigner is not None:
        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
            timestamp_assigner
        )
    operator = SourceOperator("src", "lines", ScriptedSource(reader), strategy)
    operator, _ = started(operator, ManualClock())
    return operator


def test_a_failure_down_the_chain_names_the_split_and_the_offset_after_the_batch():
    reader = Offsets([SplitBatch("a.txt", ["1", "2"]), SplitBatch("a.txt", ["3", "x", "5"])])
    operator = source_over(reader)
    operator.output = RaisingOn("x")
    operator.emit_next(100)
    assert operator.failed_at is None
    with pytest.raises(ValueError, match="cannot parse 'x'"):
        operator.emit_next(100)
    assert operator.failed_at == (
        "source 'lines', split 'a.txt', the batch of 3 record(s) read up to offset 50"
    )


def test_a_timestamp_assigner_that_raises_is_placed_too():
    def stamp(value, previous):
        return int(value)

    operator = source_over(ScriptedReader(["s"], [SplitBatch("s", ["1", "x"])]), stamp)
    with pytest.raises(ValueError):
        operator.emit_next(100)
    assert operator.failed_at == "source 'lines', split 's', the batch of 2 record(s)"
