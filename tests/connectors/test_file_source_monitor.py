"""A monitored folder (`FileSource.monitor_continuously`), driven poll by poll with a manual clock.

Files are added between polls; the clock decides when a reader lists the folder again.
Every test asserts the exact records (and, for event time, the exact watermarks and
statuses) that come out, then that nothing else did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.operator_harness import started_source

from barrierflow import Duration, WatermarkStrategy
from barrierflow._clock import ManualClock
from barrierflow.connectors.base import WHOLE_READER_SPLIT, Source, SourceSplit, SplitBatch
from barrierflow.connectors.files import FileSource
from barrierflow.connectors.files._source import MONITOR_BUCKETS, ContinuousFileReader
from barrierflow.errors import ConfigurationError, SourceError
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.source_sink import SourceOperator

INTERVAL_MS = 1_000


def monitored(folder: Path) -> FileSource:
    return FileSource.for_lines(str(folder)).monitor_continuously(INTERVAL_MS)


def subtask_splits(source: Source, index: int, parallelism: int) -> list[SourceSplit]:
    """The splits the driver deals to subtask `index` (round-robin, as job_preparation does)."""
    return source.create_splits()[index::parallelism]


def reader_of(
    source: FileSource, clock: ManualClock, index: int = 0, parallelism: int = 1, positions=None
) -> ContinuousFileReader:
    reader = source.create_reader(subtask_splits(source, index, parallelism), clock=clock)
    assert isinstance(reader, ContinuousFileReader)
    reader.restore(positions or {})
    return reader


def drain(reader: ContinuousFileReader, max_records: int = 100) -> list[SplitBatch]:
    """Poll until the reader has nothing more now (without moving the clock)."""
    batches = []
    while (batch := reader.poll_split_batch(max_records)).records or batch.finished:
        batches.append(batch)
    assert batch == SplitBatch(WHOLE_READER_SPLIT, [])
    return batches


def records(batches: list[SplitBatch]) -> list[Any]:
    return [record for batch in batches for record in batch.records]


def union(*snapshots: dict[str, Any]) -> dict[str, Any]:
    """What the SourceOperator hands a reader on restore: all old subtasks' positions."""
    merged: dict[str, Any] = {}
    for snapshot in snapshots:
        merged.update(snapshot)
    return merged


# ---- the builder -------------------------------------------------------------------------------


def test_monitoring_makes_the_source_unbounded_and_leaves_the_original_bounded(tmp_path):
    plain = FileSource.for_lines(str(tmp_path))
    watched = plain.monitor_continuously(Duration.of_seconds(2))
    assert (watched.bounded, watched.monitor_interval_ms) == (False, 2_000)
    assert (plain.bounded, plain.monitor_interval_ms) == (True, None)


@pytest.mark.parametrize("interval", [0, -5, 1.5, True, "1s"])
def test_an_interval_that_is_not_a_positive_number_of_ms_is_refused(tmp_path, interval):
    with pytest.raises(ConfigurationError, match="monitor_continuously"):
        FileSource.for_lines(str(tmp_path)).monitor_continuously(interval)


def test_the_splits_are_the_ownership_buckets(tmp_path):
    splits = monitored(tmp_path).create_splits()
    assert [split.payload for split in splits] == list(range(MONITOR_BUCKETS))
    assert len({split.split_id for split in splits}) == MONITOR_BUCKETS


def test_a_missing_folder_fails_fast_on_the_driver(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        monitored(tmp_path / "nowhere").create_splits()


def test_a_file_cannot_be_monitored(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(SourceError, match="not a folder"):
        monitored(tmp_path / "a.txt").create_splits()


# ---- discovery -----------------------------------------------------------------------------------


def test_a_file_added_later_is_read_at_the_next_listing_and_never_again(tmp_path):
    clock = ManualClock()
    (tmp_path / "a.txt").write_text("a1\na2\n")
    reader = reader_of(monitored(tmp_path), clock)

    assert drain(reader) == [
        SplitBatch("a.txt", ["a1", "a2"]),
        SplitBatch("a.txt", [], finished=True),  # no file follows: its end is reported now
    ]
    (tmp_path / "b.txt").write_text("b1\n")
    assert drain(reader) == []  # the interval has not passed: no listing yet
    clock.advance(INTERVAL_MS - 1)
    assert drain(reader) == []
    clock.advance(1)
    assert drain(reader) == [SplitBatch("b.txt", ["b1"]), SplitBatch("b.txt", [], finished=True)]
    clock.advance(INTERVAL_MS)
    assert drain(reader) == []  # listed again: a.txt and b.txt are finished


def test_a_files_end_is_reported_only_once_the_next_file_has_records(tmp_path):
    """So moving from one file to the next never makes the source look idle in between."""
    clock = ManualClock()
    (tmp_path / "a.txt").write_text("a1\n")
    (tmp_path / "b.txt").write_text("")  # empty: ends without records
    (tmp_path / "c.txt").write_text("c1\n")
    reader = reader_of(monitored(tmp_path), clock)
    assert drain(reader) == [
        SplitBatch("a.txt", ["a1"]),
        SplitBatch("c.txt", ["c1"]),
        SplitBatch("a.txt", [], finished=True),
        SplitBatch("b.txt", [], finished=True),
        SplitBatch("c.txt", [], finished=True),
    ]


def test_hidden_files_and_folders_are_ignored(tmp_path):
    clock = ManualClock()
    (tmp_path / ".a.txt").write_text("hidden\n")
    (tmp_path / "_b.txt").write_text("hidden\n")
    (tmp_path / "_staging").mkdir()
    (tmp_path / "_staging" / "c.txt").write_text("hidden\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.txt").write_text("seen\n")
    reader = reader_of(monitored(tmp_path), clock)
    assert records(drain(reader)) == ["seen"]


def test_a_file_written_hidden_and_renamed_in_is_read_once_complete(tmp_path):
    clock = ManualClock()
    reader = reader_of(monitored(tmp_path), clock)
    staged = tmp_path / ".part-1.txt"
    staged.write_text("x1\n")
    assert drain(reader) == []
    with staged.open("a") as out:
        out.write("x2\n")
    staged.rename(tmp_path / "part-1.txt")
    clock.advance(INTERVAL_MS)
    assert records(drain(reader)) == ["x1", "x2"]


def test_a_removed_folder_gives_a_clear_error(tmp_path):
    clock = ManualClock()
    folder = tmp_path / "in"
    folder.mkdir()
    reader = reader_of(monitored(folder), clock)
    assert drain(reader) == []
    folder.rmdir()
    clock.advance(INTERVAL_MS)
    with pytest.raises(SourceError, match=r"monitored folder .*in no longer exists"):
        reader.poll_split_batch(10)


def test_a_bad_line_names_the_file_line_and_offset(tmp_path):
    clock = ManualClock()
    source = FileSource.for_json_lines(str(tmp_path)).monitor_continuously(INTERVAL_MS)
    (tmp_path / "e.jsonl").write_text('{"a": 1}\n{oops\n')
    reader = reader_of(source, clock)
    with pytest.raises(SourceError, match=r"e\.jsonl: line 2 \(byte offset 9\)"):
        reader.poll_batch(10)  # on its own; in a job the SourceOperator fails (bad lines' tests)


# ---- checkpoints -------------------------------------------------------------------------------


def test_finished_files_survive_a_restore_and_are_never_read_again(tmp_path):
    clock = ManualClock()
    source = monitored(tmp_path)
    (tmp_path / "a.txt").write_text("a1\n")
    first = reader_of(source, clock)
    assert records(drain(first)) == ["a1"]
    snapshot = first.snapshot()
    bucket = [state for state in snapshot.values() if state["finished"]]
    assert bucket == [{"finished": ["a.txt"], "offsets": {}}]

    (tmp_path / "b.txt").write_text("b1\n")
    second = reader_of(source, ManualClock(), positions=snapshot)
    assert records(drain(second)) == ["b1"]


def test_a_file_in_progress_resumes_mid_file_before_any_other(tmp_path):
    clock = ManualClock()
    source = monitored(tmp_path)
    (tmp_path / "b.txt").write_text("b1\nb2\nb3\n")
    first = reader_of(source, clock)
    assert first.poll_split_batch(2) == SplitBatch("b.txt", ["b1", "b2"])
    snapshot = first.snapshot()
    assert [state["offsets"] for state in snapshot.values() if state["offsets"]] == [{"b.txt": 6}]

    (tmp_path / "a.txt").write_text("a1\n")  # sorts first, but b.txt is in progress
    second = reader_of(source, ManualClock(), positions=snapshot)
    assert second.split_ids() == ["b.txt"]
    assert drain(second) == [
        SplitBatch("b.txt", ["b3"]),
        SplitBatch("a.txt", ["a1"]),
        SplitBatch("b.txt", [], finished=True),
        SplitBatch("a.txt", [], finished=True),
    ]


def test_the_snapshot_is_a_small_msgpack_value_per_bucket(tmp_path):
    import msgpack

    (tmp_path / "a.txt").write_text("a1\n")
    reader = reader_of(monitored(tmp_path), ManualClock())
    drain(reader)
    snapshot = reader.snapshot()
    assert set(snapshot) == {split.split_id for split in monitored(tmp_path).create_splits()}
    assert msgpack.unpackb(msgpack.packb(snapshot)) == snapshot


@pytest.mark.parametrize(("old", "new"), [(1, 3), (3, 2), (2, 5), (4, 1)])
def test_rescaling_reads_every_file_exactly_once(tmp_path, old, new):
    """Restore from the union of all old subtasks' snapshots at another parallelism: files
    finished before are never read again, files in progress resume, the rest are read once."""
    names = [f"f{i:02}.txt" for i in range(24)]
    for name in names:
        (tmp_path / name).write_text(f"{name}:1\n{name}:2\n")
    source = monitored(tmp_path)

    # Before the rescale: every old subtask reads its first file whole and half of its second.
    before: list[Any] = []
    olds = [reader_of(source, ManualClock(), i, old) for i in range(old)]
    for reader in olds:
        before += reader.poll_split_batch(2).records + reader.poll_split_batch(1).records
    snapshots = [reader.snapshot() for reader in olds]
    states = [state for snapshot in snapshots for state in snapshot.values()]
    # Both kinds of state take part in the rescale: finished files and files in progress.
    assert any(state["finished"] for state in states)
    assert any(state["offsets"] for state in states)

    # After: new subtasks restore from the union and read everything that is left.
    after: list[Any] = []
    news = [reader_of(source, ManualClock(), i, new, union(*snapshots)) for i in range(new)]
    for reader in news:
        after += records(drain(reader))
    expected = sorted(f"{name}:{n}" for name in names for n in (1, 2))
    assert sorted(before + after) == expected
    assert sum(reader.owns(name) for reader in news for name in names) == len(names)


def test_more_subtasks_than_buckets_leave_the_extra_ones_without_files(tmp_path):
    (tmp_path / "a.txt").write_text("a1\n")
    source = monitored(tmp_path)
    parallelism = MONITOR_BUCKETS + 1
    extra = reader_of(source, ManualClock(), MONITOR_BUCKETS, parallelism)
    assert drain(extra) == []
    assert extra.snapshot() == {}


# ---- in the SourceOperator: per-file watermarks, idleness ------------------------------------


class _Clocks:
    """One manual time for the operator (ms, called) and the reader's listings (`monotonic`)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def monotonic(self) -> float:
        return self.now / 1000

    def epoch_millis(self) -> int:
        return self.now


class _ClockedSource(Source):
    """The monitored FileSource, its readers timed by the test's clock."""

    bounded = False

    def __init__(self, source: FileSource, clock: _Clocks) -> None:
        self.source, self.clock = source, clock

    def create_splits(self) -> list[SourceSplit]:
        return self.source.create_splits()

    def create_reader(self, splits):
        return self.source.create_reader(splits, clock=self.clock)


def _operator(folder: Path, clock: _Clocks, restored: RestoredState | None = None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(0)
    ).with_timestamp_assigner(lambda line, _: int(line))
    source = _ClockedSource(monitored(folder), clock)
    # interval: the test emits periodic watermarks by hand
    return started_source(source, clock, restored, strategy=strategy, interval_ms=10_000)


def _until_nothing(operator: SourceOperator) -> None:
    while operator.emit_next(100) == SourceOperator.MORE_AVAILABLE:
        pass


def _periodic_watermark(operator: SourceOperator, clock: _Clocks) -> None:
    """Move time to the operator's next periodic watermark and emit it."""
    due = operator.next_wakeup()
    assert due is not None
    clock.now = max(clock.now, due)
    operator.on_processing_time(clock.now)


def test_files_appearing_over_time_each_get_a_watermark_and_the_source_idles_between(tmp_path):
    clock = _Clocks()
    operator, out = _operator(tmp_path, clock)
    IDLE, ACTIVE = StreamStatus.IDLE, StreamStatus.ACTIVE

    # No file yet: the source is idle, and holds no watermark back.
    assert operator.emit_next(100) == SourceOperator.NOTHING_AVAILABLE
    assert out.take() == [("status", IDLE)]

    # A first file appears: active again; its end leaves the source idle, not at MAX.
    (tmp_path / "a.txt").write_text("100\n300\n")
    clock.now += INTERVAL_MS
    _until_nothing(operator)
    _periodic_watermark(operator, clock)
    assert out.take() == [
        ("status", ACTIVE),
        ("record", "100", 100),
        ("record", "300", 300),
        ("status", IDLE),
    ]

    # A second file: it is a new split, registered when its first records come.
    (tmp_path / "b.txt").write_text("500\n")
    clock.now += INTERVAL_MS
    assert operator.emit_next(100) == SourceOperator.MORE_AVAILABLE
    _periodic_watermark(operator, clock)
    assert out.take() == [("status", ACTIVE), ("record", "500", 500), ("watermark", 499)]
    _until_nothing(operator)
    assert out.take() == [("status", IDLE)]

    # Stopping with drain ends the input as a bounded source would.
    operator.stop(drain=True)
    assert out.take() == [("status", ACTIVE), ("watermark", MAX_WATERMARK)]


def test_after_a_restore_the_file_in_progress_is_a_split_from_the_start(tmp_path):
    clock = _Clocks()
    (tmp_path / "a.txt").write_text("100\n200\n")
    operator, out = _operator(tmp_path, clock)
    assert operator.emit_next(1) == SourceOperator.MORE_AVAILABLE
    snapshot = operator.snapshot_state(1).operator

    restored, out = _operator(tmp_path, _Clocks(), RestoredState(operator=[(0, snapshot)]))
    _until_nothing(restored)
    assert out.take() == [("record", "200", 200), ("status", StreamStatus.IDLE)]
