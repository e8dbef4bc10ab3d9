"""FileSource lines that do not decode: the job fails naming source, file, line and byte
offset, or, with `with_dead_letters()`, they leave on the DEAD_LETTERS side output and count
as read. Bounded and monitored readers, driven through the SourceOperator."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.operator_harness import started_source

from barrierflow._clock import ManualClock
from barrierflow.connectors.base import DEAD_LETTERS, DeadLetter, Source, SourceSplit
from barrierflow.connectors.files import FileSource
from barrierflow.errors import SourceError
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.source_sink import SourceOperator

LINES = b'{"n": 1}\n{"n": 2\n\xff\xfe\n{"n": 4}\n'
"""Line 2 (byte 9) is not JSON, line 3 (byte 17) not UTF-8."""


class _Clocked(Source):
    """A FileSource whose monitored readers list the folder by the test's manual clock."""

    def __init__(self, source: FileSource, clock: ManualClock) -> None:
        self.source, self.clock = source, clock
        self.bounded, self.dead_letters = source.bounded, source.dead_letters

    def create_splits(self) -> list[SourceSplit]:
        return self.source.create_splits()

    def create_reader(self, splits):
        return self.source.create_reader(splits, clock=self.clock)


def operator_over(source: FileSource, restored: RestoredState | None = None):
    return started_source(_Clocked(source, ManualClock()), restored=restored, name="events")


def run(operator: SourceOperator, max_records: int = 100) -> None:
    """Until the end of input (bounded) or until nothing more is there (monitored)."""
    for _ in range(1000):
        if operator.emit_next(max_records) != SourceOperator.MORE_AVAILABLE:
            return
    raise AssertionError("the source never ran out of input")


def sources(folder: Path) -> dict[str, FileSource]:
    return {
        "bounded": FileSource.for_json_lines(str(folder)),
        "monitored": FileSource.for_json_lines(str(folder)).monitor_continuously(1_000),
    }


@pytest.mark.parametrize("kind", ["bounded", "monitored"])
def test_by_default_a_bad_line_fails_naming_source_file_line_and_byte_offset(tmp_path, kind):
    (tmp_path / "e.jsonl").write_bytes(LINES)
    operator, _ = operator_over(sources(tmp_path)[kind])
    with pytest.raises(SourceError) as failure:
        run(operator)
    operator.close()
    assert str(failure.value).startswith(
        "source 'events': cannot decode the record at byte offset 9 of split 'e.jsonl': "
        f"line 2 of {(tmp_path / 'e.jsonl').as_uri()} is not valid JSON"
    )


@pytest.mark.parametrize("kind", ["bounded", "monitored"])
def test_with_dead_letters_bad_lines_leave_on_the_side_output_with_their_error(tmp_path, kind):
    (tmp_path / "e.jsonl").write_bytes(LINES)
    operator, out = operator_over(sources(tmp_path)[kind].with_dead_letters())
    run(operator)
    snapshot = operator.snapshot_state(1).operator
    operator.close()
    events = out.take()
    assert [e[1] for e in events if e[0] == "record"] == [{"n": 1}, {"n": 4}]
    assert {e[1] for e in events if e[0] == "side"} == {DEAD_LETTERS.tag_id}
    letters = [e[2] for e in events if e[0] == "side"]
    assert all(isinstance(letter, DeadLetter) for letter in letters)
    uri = (tmp_path / "e.jsonl").as_uri()
    assert [(x.source, x.split_id, x.offset, x.raw) for x in letters] == [
        ("events", "e.jsonl", 9, b'{"n": 2'),
        ("events", "e.jsonl", 17, b"\xff\xfe"),
    ]
    assert letters[0].error.startswith(f"line 2 of {uri} is not valid JSON: ")
    assert letters[1].error == f"line 3 of {uri} is not valid UTF-8"
    # Read past: a restore from this snapshot reads neither line again.
    again, out = operator_over(
        sources(tmp_path)[kind].with_dead_letters(), RestoredState(operator=[(0, snapshot)])
    )
    run(again)
    again.close()
    assert [e for e in out.take() if e[0] in ("record", "side")] == []


def test_dead_letters_after_a_restore_mid_file_still_have_their_true_line_numbers(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"1\n2\nx\n4\ny\n")
    source = FileSource.for_json_lines(str(tmp_path)).with_dead_letters()
    operator, out = operator_over(source, RestoredState(operator=[(0, {"e.jsonl": 4})]))
    run(operator, max_records=1)  # one line per batch: numbers followed across batches
    operator.close()
    letters = [e[2] for e in out.take() if e[0] == "side"]
    assert [(x.offset, x.error.split(" of ")[0]) for x in letters] == [(4, "line 3"), (8, "line 5")]


def test_dead_letters_is_a_setting_of_a_copy(tmp_path):
    plain = FileSource.for_lines(str(tmp_path))
    assert plain.with_dead_letters().dead_letters and not plain.dead_letters
    assert not plain.with_dead_letters().with_dead_letters(False).dead_letters
    assert plain.with_dead_letters().monitor_continuously(500).dead_letters
