"""Records a reader cannot decode: the job fails naming source, split and offset, or, with
`Source.dead_letters`, they leave on the DEAD_LETTERS side output (issue 13)."""

from __future__ import annotations

import pytest
from support.clocks import ManualClock
from support.operator_harness import ScriptedReader, ScriptedSource, started

from barrierflow import WatermarkStrategy
from barrierflow.connectors.base import DEAD_LETTERS, BadRecord, DeadLetter, SplitBatch
from barrierflow.errors import SourceError
from barrierflow.runtime.operators.source_sink import SourceOperator

BAD = BadRecord("events.a", 42, b"{oops", "JSONDecodeError: Expecting value", "stream sequence")


def operator_reading(script, *, dead_letters):
    source = ScriptedSource(ScriptedReader(["events.a"], script))
    source.dead_letters = dead_letters
    operator = SourceOperator("src", "events", source, WatermarkStrategy.no_watermarks())
    started(operator, ManualClock())
    return operator, operator.output


def test_a_bad_record_fails_the_task_naming_source_split_and_offset():
    operator, out = operator_reading(
        [SplitBatch("events.a", [1], [10], bad=[BAD])], dead_letters=False
    )
    with pytest.raises(SourceError) as failure:
        operator.emit_next(100)
    assert str(failure.value) == (
        "source 'events': cannot decode the record at stream sequence 42 of split 'events.a': "
        "JSONDecodeError: Expecting value"
    )
    assert out.take() == [("record", 1, 10)]  # the good record before it went out first


def test_with_dead_letters_a_bad_record_goes_to_the_side_output_and_reading_goes_on():
    operator, out = operator_reading(
        [SplitBatch("events.a", [1], [10], bad=[BAD]), SplitBatch("events.a", [2], [20])],
        dead_letters=True,
    )
    assert operator.emit_next(100) == SourceOperator.MORE_AVAILABLE
    letter = DeadLetter("events", "events.a", 42, b"{oops", "JSONDecodeError: Expecting value")
    assert out.take() == [("record", 1, 10), ("side", DEAD_LETTERS.tag_id, letter, None)]
    assert operator.emit_next(100) == SourceOperator.MORE_AVAILABLE
    assert out.take() == [("record", 2, 20)]


def test_a_batch_of_only_bad_records_counts_as_progress():
    operator, out = operator_reading([SplitBatch("events.a", [], bad=[BAD])], dead_letters=True)
    assert operator.emit_next(100) == SourceOperator.MORE_AVAILABLE
    assert [event[0] for event in out.take()] == ["side"]
