"""FileSink's formats (JSON Lines, Parquet), partition folders, rolling policies, and the
restore of snapshots the FileSink wrote before it was built on TwoPhaseCommitSink."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from barrierflow._clock import ManualClock
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink, RollingPolicy
from barrierflow.errors import SinkError


def started(sink: FileSink, deployment: str = "run1-0", states=(), subtask: int = 0):
    writer = sink.create_writer(SinkContext("sink", subtask, 1, 0, deployment))
    writer.restore(list(states))
    return writer


def visible_files(out: Path) -> list[str]:
    """Committed part files, relative to `out`, as Spark lists them (hidden names skipped)."""
    return sorted(
        str(p.relative_to(out))
        for p in out.rglob("part-*")
        if not any(part.startswith((".", "_")) for part in p.relative_to(out).parts)
    )


def staged_files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in (out / ".staging").rglob("*") if p.is_file())


@pytest.fixture
def out(tmp_path):
    return tmp_path / "out"


# ---- Parquet ------------------------------------------------------------------------------------


def test_parquet_part_files_hold_the_rows_with_an_inferred_schema(out):
    sink = FileSink.for_rows(str(out)).with_format("parquet")
    writer = started(sink)
    writer.write_batch([{"word": "a", "n": 1}, {"word": "b", "n": 2}])
    writer.write_batch([{"word": "c", "n": None}])
    writer.pre_commit(1)
    assert visible_files(out) == []
    writer.commit(1)
    (name,) = visible_files(out)
    assert name == "part-sink-0-run1-0-00000000.parquet"
    table = pq.read_table(out / name)
    assert table.schema.field("n").type == pa.int64()
    assert table.to_pylist() == [
        {"word": "a", "n": 1},
        {"word": "b", "n": 2},
        {"word": "c", "n": None},
    ]
    assert sink.committed_output() == table.to_pylist()


def test_a_given_parquet_schema_is_used_and_a_row_that_does_not_fit_names_itself(out):
    schema = pa.schema([("word", pa.string()), ("n", pa.int32())])
    writer = started(FileSink.for_rows(str(out)).with_format("parquet", schema=schema))
    writer.write_batch([{"word": "a"}])  # a missing column is null
    with pytest.raises(SinkError, match=r"does not fit the parquet schema.*'n': 'many'"):
        writer.write_batch([{"word": "b", "n": 2}, {"word": "c", "n": "many"}])
    with pytest.raises(SinkError, match=r"column\(s\) \['extra'\].*lacks"):
        writer.write_batch([{"word": "d", "n": 4, "extra": True}])
    with pytest.raises(SinkError, match=r"writes dicts.*type tuple"):
        writer.write_batch([("e", 5)])
    writer.pre_commit(1)
    writer.commit(1)
    (name,) = visible_files(out)
    assert pq.read_table(out / name).to_pylist() == [{"word": "a", "n": None}]
    assert pq.read_table(out / name).schema == schema


def test_the_inferred_schema_is_kept_for_every_later_part_file(out):
    writer = started(FileSink.for_rows(str(out)).with_format("parquet"))
    writer.write_batch([{"n": 1}])
    writer.pre_commit(1)
    with pytest.raises(SinkError, match="does not fit the parquet schema"):
        writer.write_batch([{"n": "text"}])


def test_a_format_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match="unknown file format 'csv'"):
        FileSink.for_rows("x").with_format("csv")


# ---- partition folders ----------------------------------------------------------------------


def test_rows_go_to_hive_style_folders_of_their_partition_fields(out):
    sink = FileSink.for_rows(str(out)).with_format("parquet").partition_by("date", "kind")
    writer = started(sink)
    rows = [
        {"date": "2024-05-01", "kind": "a/b", "n": 1},
        {"date": "2024-05-02", "kind": "x", "n": 2},
        {"date": "2024-05-01", "kind": "a/b", "n": 3},
        {"date": None, "kind": "x", "n": 4},
    ]
    writer.write_batch(rows)
    writer.pre_commit(1)
    writer.commit(1)
    assert [name.rsplit("/", 1)[0] for name in visible_files(out)] == [
        "date=2024-05-01/kind=a%2Fb",
        "date=2024-05-02/kind=x",
        "date=__HIVE_DEFAULT_PARTITION__/kind=x",
    ]
    assert sorted(sink.committed_output(), key=lambda r: r["n"]) == rows  # fields kept
    assert staged_files(out) == []


def test_a_partition_function_names_the_folder_and_json_lines_partition_too(out):
    sink = FileSink.for_rows(str(out)).partition_by(lambda row: f"bucket={row[0] % 2}")
    writer = started(sink)
    writer.write_batch([[1, "one"], [2, "two"], [3, "three"]])
    writer.pre_commit(1)
    writer.commit(1)
    assert visible_files(out) == [
        "bucket=0/part-sink-0-run1-0-00000001.jsonl",
        "bucket=1/part-sink-0-run1-0-00000000.jsonl",
    ]
    assert (out / visible_files(out)[1]).read_text().splitlines() == ['[1,"one"]', '[3,"three"]']
    assert sorted(sink.committed_output()) == [[1, "one"], [2, "two"], [3, "three"]]


@pytest.mark.parametrize(
    ("partition", "row", "message"),
    [
        ("date", {"n": 1}, "lacks the partition field 'date'"),
        ("date", ["2024"], "needs dict rows"),
        (lambda row: row["missing"], {"n": 1}, "cannot find the partition folder.*KeyError"),
        (lambda row: "../up", {"n": 1}, "hidden or relative part"),
        (lambda row: "a//b", {"n": 1}, "empty, hidden or relative part"),
    ],
    ids=["missing-field", "not-a-dict", "function-raises", "relative", "empty-part"],
)
def test_a_row_without_a_valid_partition_folder_is_a_sink_error(out, partition, row, message):
    writer = started(FileSink.for_rows(str(out)).partition_by(partition))
    with pytest.raises(SinkError, match=message):
        writer.write_batch([row])
    assert staged_files(out) == []


# ---- rolling --------------------------------------------------------------------------------


def test_by_default_a_part_file_rolls_only_at_each_checkpoint(out):
    writer = started(FileSink.for_rows(str(out)))
    for n in range(5):
        writer.write_batch([n])
    writer.pre_commit(1)
    writer.write_batch([5])
    writer.pre_commit(2)
    writer.commit(2)
    assert len(visible_files(out)) == 2


def test_rolling_by_size_gives_a_transaction_several_files_committed_together(out):
    sink = FileSink.for_rows(str(out)).with_rolling_policy(RollingPolicy.by_size(4))
    writer = started(sink)
    for word in ["aa", "bb", "c", "dd"]:  # each line is 5 bytes: one file per batch
        writer.write_batch([word])
    assert len(staged_files(out)) == 4
    writer.pre_commit(1)
    writer.write_batch(["next"])
    assert visible_files(out) == []
    writer.commit(1)
    assert [(out / name).read_text() for name in visible_files(out)] == [
        '"aa"\n',
        '"bb"\n',
        '"c"\n',
        '"dd"\n',
    ]


def test_rolling_by_time_uses_the_sinks_clock(out):
    clock = ManualClock()
    sink = FileSink(str(out), clock=clock).with_rolling_policy(RollingPolicy.by_time(1000))
    writer = started(sink)
    writer.write_batch([1])
    clock.advance(999)
    writer.write_batch([2])
    clock.advance(1)
    writer.write_batch([3])  # the first file has been open 1000 ms
    writer.pre_commit(1)
    writer.commit(1)
    assert [(out / name).read_text() for name in visible_files(out)] == ["1\n2\n", "3\n"]


def test_parquet_rolls_by_size_per_partition_folder(out):
    sink = (
        FileSink.for_rows(str(out))
        .with_format("parquet")
        .partition_by("p")
        .with_rolling_policy(RollingPolicy.by_size(1))
    )
    writer = started(sink)
    writer.write_batch([{"p": "x", "n": 1}, {"p": "y", "n": 2}])
    writer.write_batch([{"p": "x", "n": 3}])
    writer.pre_commit(1)
    writer.commit(1)
    assert [name.rsplit("/", 1)[0] for name in visible_files(out)] == ["p=x", "p=x", "p=y"]
    assert sorted(r["n"] for r in sink.committed_output()) == [1, 2, 3]


def test_an_abort_deletes_the_rolled_files_of_the_open_transaction_too(out):
    sink = FileSink.for_rows(str(out)).with_rolling_policy(RollingPolicy.by_size(1))
    writer = started(sink)
    writer.write_batch([1])
    writer.pre_commit(1)
    writer.write_batch([2])
    writer.write_batch([3])
    assert len(staged_files(out)) == 3
    writer.abort()
    assert len(staged_files(out)) == 1  # checkpoint 1's file waits for a restore to decide


def test_a_rolling_policy_needs_positive_limits():
    with pytest.raises(ValueError, match="max_part_size must be positive"):
        RollingPolicy.by_size(0)


# ---- restore ----------------------------------------------------------------------------------


def test_a_restore_commits_pending_partitioned_parquet_and_deletes_what_was_open(out):
    sink = FileSink.for_rows(str(out)).with_format("parquet").partition_by("date")
    crashed = started(pickle.loads(pickle.dumps(sink)))
    crashed.write_batch([{"date": "d1", "n": 1}])
    crashed.pre_commit(1)
    state = crashed.snapshot_state()
    crashed.write_batch([{"date": "d2", "n": 2}])  # replayed after the restore

    started(pickle.loads(pickle.dumps(sink)), deployment="run1-1", states=[state])

    assert [name.split("/")[0] for name in visible_files(out)] == ["date=d1"]
    assert sink.committed_output() == [{"date": "d1", "n": 1}]
    assert staged_files(out) == []


def test_a_snapshot_of_the_file_sink_before_two_phase_commit_sink_is_restored(out):
    # What FileSinkWriter.snapshot_state() returned before it was built on
    # TwoPhaseCommitSink, with its files on disk as that writer left them.
    staging = out / ".staging" / "sink" / "0" / "run1-0"
    staging.mkdir(parents=True)
    (staging / "part-sink-0-run1-0-00000000.jsonl").write_text('["a",1]\n')
    (staging / "part-sink-0-run1-0-00000001.jsonl").write_text('["in progress",2]\n')
    old_state = {
        "version": 1,
        "pending": [
            {
                "checkpoint_id": 3,
                "staged": ".staging/sink/0/run1-0/part-sink-0-run1-0-00000000.jsonl",
                "final": "part-sink-0-run1-0-00000000.jsonl",
            }
        ],
    }
    sink = FileSink.for_rows(str(out))
    writer = started(sink, deployment="run2-0", states=[old_state])

    assert visible_files(out) == ["part-sink-0-run1-0-00000000.jsonl"]
    assert staged_files(out) == []
    writer.write_batch([["b", 2]])
    writer.pre_commit(4)
    writer.commit(4)
    assert sorted(sink.committed_output()) == [["a", 1], ["b", 2]]
    assert json.loads((out / visible_files(out)[1]).read_text()) == ["b", 2]


def test_the_sink_pickles_without_its_open_files(out):
    sink = FileSink.for_rows(str(out))
    writer = started(sink)
    writer.write_batch([1])
    assert pickle.loads(pickle.dumps(writer.sink))._task is None
