"""DeltaSink: one Delta commit per checkpoint and subtask, each carrying an application
transaction, so a commit repeated after a failure is skipped and no row lands twice."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import msgpack
import pyarrow as pa
import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.delta import DeltaSink
from barrierflow.errors import SinkError

deltalake = pytest.importorskip("deltalake")

JOB = "orders-job"


def context(subtask: int = 0, parallelism: int = 2, deployment: str = "run1-0", restored=None):
    return SinkContext("delta-out", subtask, parallelism, 0, deployment, JOB, restored)


def new_writer(sink: DeltaSink, restore=(), **kwargs):
    """A writer as a task makes one: its own copy of the sink (shipped pickled), created, then
    restored once from snapshots that went through the checkpoint's encoding."""
    task_sink = pickle.loads(pickle.dumps(sink))
    writer = task_sink.create_writer(context(**kwargs))
    writer.restore([checkpointed(state) for state in restore])
    return writer


def checkpointed(state):
    """`state` as a restore reads it back from a checkpoint (msgpack round trip)."""
    return msgpack.unpackb(msgpack.packb(state, use_bin_type=True), raw=False)


def rows(table: Path) -> list[dict]:
    """The committed rows: the files the Delta log lists, read with pyarrow, sorted.

    (Not deltalake's `to_pyarrow_dataset()`: with deltalake 1.6 it sometimes aborts the
    process at exit, which would fail a whole test run.)"""
    committed = DeltaSink.for_path(str(table)).committed_output()
    return sorted(committed, key=lambda r: json.dumps(r, sort_keys=True))


def commits(table: Path) -> list[tuple[str, int]]:
    """(app id, version) of every application transaction in the Delta log, in log order."""
    found = []
    for entry in sorted((table / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found.append((action["txn"]["appId"], action["txn"]["version"]))
    return found


def data_files(table: Path) -> list[str]:
    return sorted(str(p.relative_to(table)) for p in table.rglob("*.parquet"))


@pytest.fixture
def table(tmp_path) -> Path:
    return tmp_path / "orders"


def test_rows_become_visible_when_their_checkpoint_completes_and_the_table_is_created_then(table):
    writer = new_writer(DeltaSink.for_path(str(table)))
    writer.write_batch([{"id": 1, "item": "apple"}, {"id": 2, "item": "pear"}])
    writer.pre_commit(1)

    assert not deltalake.DeltaTable.is_deltatable(str(table))
    assert len(data_files(table)) == 1  # written at pre-commit, referenced by no commit

    writer.commit(1)
    assert rows(table) == [{"id": 1, "item": "apple"}, {"id": 2, "item": "pear"}]
    assert commits(table) == [(f"{JOB}/delta-out/0", 1)]
    assert pa.schema(deltalake.DeltaTable(str(table)).schema().to_arrow()) == pa.schema(
        [("id", pa.int64()), ("item", pa.string())]
    )


def test_each_checkpoint_and_subtask_is_one_delta_commit_with_its_app_transaction(table):
    sink = DeltaSink.for_path(str(table))
    writers = [new_writer(sink, subtask=i) for i in (0, 1)]
    for checkpoint in (1, 2):
        for subtask, writer in enumerate(writers):
            writer.write_batch([{"n": checkpoint * 10 + subtask}])
            writer.write_batch([{"n": checkpoint * 100 + subtask}])  # two batches, one commit
            writer.pre_commit(checkpoint)
        for writer in writers:
            writer.commit(checkpoint)

    assert sorted(commits(table)) == [
        (f"{JOB}/delta-out/0", 1),
        (f"{JOB}/delta-out/0", 2),
        (f"{JOB}/delta-out/1", 1),
        (f"{JOB}/delta-out/1", 2),
    ]
    assert sorted(r["n"] for r in rows(table)) == [10, 11, 20, 21, 100, 101, 200, 201]
    delta = deltalake.DeltaTable(str(table))
    assert delta.transaction_version(f"{JOB}/delta-out/0") == 2
    assert delta.version() == 4  # the creation, then one commit per checkpoint and subtask


def test_a_checkpoint_without_rows_makes_no_commit(table):
    writer = new_writer(DeltaSink.for_path(str(table)))
    writer.write_batch([{"n": 1}])
    writer.pre_commit(1)
    writer.commit(1)
    writer.pre_commit(2)
    writer.commit(2)
    assert commits(table) == [(f"{JOB}/delta-out/0", 1)]


def test_a_commit_repeated_after_a_crash_is_skipped(table):
    sink = DeltaSink.for_path(str(table))
    writer = new_writer(sink, deployment="run1-0")
    writer.write_batch([{"n": 1}, {"n": 2}])
    writer.pre_commit(3)
    snapshot = writer.snapshot_state()  # checkpoint 3 holds the pending transaction
    writer.commit(3)  # ... committed, then the task dies before it learns anything else

    restored = new_writer(sink, restore=[snapshot], deployment="run1-1", restored=3)

    assert sorted(r["n"] for r in rows(table)) == [1, 2]
    assert commits(table) == [(f"{JOB}/delta-out/0", 3)]
    restored.write_batch([{"n": 3}])
    restored.pre_commit(4)
    restored.commit(4)
    assert sorted(r["n"] for r in rows(table)) == [1, 2, 3]


def test_a_pending_transaction_of_the_restored_checkpoint_is_committed_on_restore(table):
    sink = DeltaSink.for_path(str(table))
    writer = new_writer(sink)
    writer.write_batch([{"n": 1}])
    writer.pre_commit(1)
    snapshot = writer.snapshot_state()  # the task dies before the checkpoint's completion

    new_writer(sink, restore=[snapshot], deployment="run1-1", restored=1)
    new_writer(sink, restore=[snapshot], deployment="run1-2", restored=1)  # restored again

    assert rows(table) == [{"n": 1}]
    assert commits(table) == [(f"{JOB}/delta-out/0", 1)]


def test_after_a_rescale_each_restored_transaction_commits_under_its_own_app_id(table):
    sink = DeltaSink.for_path(str(table))
    old = [new_writer(sink, subtask=i, parallelism=2) for i in (0, 1)]
    snapshots = []
    for subtask, writer in enumerate(old):
        writer.write_batch([{"n": subtask}])
        writer.pre_commit(5)
        snapshots.append(writer.snapshot_state())
    old[1].commit(5)  # only old subtask 1 committed before the failure

    # parallelism 2 -> 1: the one new subtask receives both old subtasks' state
    merged = new_writer(sink, restore=snapshots, subtask=0, parallelism=1, deployment="run2-0")
    merged.write_batch([{"n": 7}])
    merged.pre_commit(6)
    merged.commit(6)

    assert sorted(r["n"] for r in rows(table)) == [0, 1, 7]
    assert sorted(commits(table)) == [
        (f"{JOB}/delta-out/0", 5),
        (f"{JOB}/delta-out/0", 6),
        (f"{JOB}/delta-out/1", 5),
    ]


def test_abort_deletes_the_files_of_the_open_transaction(table):
    sink = DeltaSink(str(table), target_file_size=1)  # every batch is written at once
    writer = new_writer(sink)
    writer.write_batch([{"n": 1}])
    writer.pre_commit(1)
    writer.commit(1)
    committed_files = data_files(table)
    writer.write_batch([{"n": 2}])
    writer.write_batch([{"n": 3}])
    assert len(data_files(table)) == 3

    writer.abort()

    assert data_files(table) == committed_files
    assert rows(table) == [{"n": 1}]


def test_the_open_transaction_of_the_restored_checkpoint_is_aborted_and_its_files_deleted(table):
    sink = DeltaSink(str(table), target_file_size=1)
    writer = new_writer(sink)
    writer.write_batch([{"n": 1}])  # written to a file before the barrier of checkpoint 1
    snapshot = writer.snapshot_state()
    assert len(data_files(table)) == 1

    new_writer(sink, restore=[snapshot], deployment="run1-1")

    assert data_files(table) == []


def test_aborting_a_transaction_the_table_already_holds_keeps_its_files(table):
    """A pre-committed transaction whose commit went through before a restore from an older
    point is aborted without deleting files the Delta log references."""
    sink = DeltaSink.for_path(str(table))
    writer = new_writer(sink)
    writer.write_batch([{"n": 1}])
    writer.pre_commit(1)
    handle = writer.snapshot_state()["pending"][0][1]
    writer.commit(1)

    writer.sink.abort(checkpointed(handle))

    assert rows(table) == [{"n": 1}]


def test_a_live_commit_below_the_tables_app_version_is_an_error_not_a_silent_skip(table):
    sink = DeltaSink.for_path(str(table))
    first = new_writer(sink)
    first.write_batch([{"n": 1}])
    first.pre_commit(9)
    first.commit(9)

    rerun = new_writer(sink, deployment="run2-0")  # checkpoint ids started over
    rerun.write_batch([{"n": 2}])
    rerun.pre_commit(1)
    with pytest.raises(SinkError, match=r"already holds checkpoint 9 of 'orders-job/delta-out/0'"):
        rerun.commit(1)


def test_a_row_of_the_wrong_type_fails_naming_the_table_the_field_and_the_row(table):
    sink = DeltaSink.for_path(str(table)).with_schema(
        pa.schema([("id", pa.int64()), ("item", pa.string())])
    )
    sink.prepare()
    writer = new_writer(sink)
    with pytest.raises(SinkError) as raised:
        writer.write_batch([{"id": 1, "item": "a"}, {"id": "two", "item": "b"}])
    message = str(raised.value)
    assert "DeltaSink 'delta-out'" in message and str(table) in message
    assert "field 'id' of type int64" in message and "'two'" in message and "row 1" in message


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"id": 1, "colour": "red"}, "field 'colour' is not in the table"),
        ("just a string", "a row must be a dict"),
    ],
    ids=["unknown-field", "not-a-dict"],
)
def test_a_row_that_does_not_fit_the_table_fails_naming_why(table, row, expected):
    sink = DeltaSink.for_path(str(table)).with_schema(pa.schema([("id", pa.int64())]))
    sink.prepare()
    writer = new_writer(sink)
    with pytest.raises(SinkError, match=expected):
        writer.write_batch([row])


def test_a_missing_field_is_null_unless_the_schema_forbids_it(table):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("note", pa.string())])
    sink = DeltaSink.for_path(str(table)).with_schema(schema)
    sink.prepare()
    writer = new_writer(sink)
    writer.write_batch([{"id": 1}])
    with pytest.raises(SinkError, match="field 'id' may not be null"):
        writer.write_batch([{"note": "no id"}])
    writer.pre_commit(1)
    writer.commit(1)
    assert rows(table) == [{"id": 1, "note": None}]


def test_a_schema_that_differs_from_the_existing_tables_fails_at_prepare_naming_the_field(table):
    deltalake.write_deltalake(str(table), pa.table({"id": [1], "item": ["a"]}))
    sink = DeltaSink.for_path(str(table)).with_schema(
        pa.schema([("id", pa.int64()), ("item", pa.int32())])
    )
    with pytest.raises(SinkError, match=r"field 'item' is string in the table, int32 in the sink"):
        sink.prepare()


def test_rows_are_converted_to_the_existing_tables_schema(table):
    deltalake.write_deltalake(str(table), pa.table({"id": [1], "price": [1.5]}))
    writer = new_writer(DeltaSink.for_path(str(table)))
    writer.write_batch([{"id": 2, "price": 3}])  # an int where the table holds doubles
    writer.pre_commit(1)
    writer.commit(1)
    assert rows(table) == [{"id": 1, "price": 1.5}, {"id": 2, "price": 3.0}]


def test_files_inferred_differently_from_the_table_another_subtask_created_fail_to_commit(table):
    sink = DeltaSink.for_path(str(table))
    ints, floats = new_writer(sink, subtask=0), new_writer(sink, subtask=1)
    ints.write_batch([{"n": 1}])
    floats.write_batch([{"n": 1.5}])  # inferred before the table exists
    ints.pre_commit(1)
    floats.pre_commit(1)
    ints.commit(1)  # creates the table with n: int64
    with pytest.raises(SinkError, match=r"field 'n' is int64 in the table, double in the sink"):
        floats.commit(1)
    assert rows(table) == [{"n": 1}]


def test_a_field_only_null_in_the_first_rows_asks_for_a_schema(table):
    writer = new_writer(DeltaSink.for_path(str(table)))
    with pytest.raises(SinkError, match=r"field 'note' is null .*with_schema"):
        writer.write_batch([{"id": 1, "note": None}])


def test_partitioned_tables_get_one_folder_per_value_and_read_back_whole(table):
    sink = DeltaSink.for_path(str(table)).partition_by("day")
    writer = new_writer(sink)
    writer.write_batch(
        [
            {"day": "2024-05-01", "n": 1},
            {"day": "2024-05-02", "n": 2},
            {"day": "2024-05-01", "n": 3},
            {"day": "a b/c", "n": 4},
            {"day": None, "n": 5},
        ]
    )
    writer.pre_commit(1)
    writer.commit(1)

    folders = sorted({Path(f).parent.name for f in data_files(table)})
    assert folders == [
        "day=2024-05-01",
        "day=2024-05-02",
        "day=__HIVE_DEFAULT_PARTITION__",
        "day=a%20b%2Fc",
    ]
    assert commits(table) == [(f"{JOB}/delta-out/0", 1)]
    expected = [
        {"day": "2024-05-01", "n": 1},
        {"day": "2024-05-01", "n": 3},
        {"day": "2024-05-02", "n": 2},
        {"day": "a b/c", "n": 4},
        {"day": None, "n": 5},
    ]
    assert sorted(rows(table), key=lambda r: r["n"]) == sorted(expected, key=lambda r: r["n"])
    assert sorted(sink.committed_output(), key=lambda r: r["n"]) == sorted(
        expected, key=lambda r: r["n"]
    )


def test_partition_columns_other_than_the_tables_fail_at_prepare(table):
    deltalake.write_deltalake(str(table), pa.table({"day": ["x"], "n": [1]}), partition_by=["day"])
    with pytest.raises(SinkError, match=r"partitioned by \['day'\], the sink by \['n'\]"):
        DeltaSink.for_path(str(table)).partition_by("n").prepare()


def test_file_stats_let_readers_skip_files(table):
    writer = new_writer(DeltaSink.for_path(str(table)))
    writer.write_batch([{"n": 3, "s": "x"}, {"n": 9, "s": None}])
    writer.pre_commit(1)
    writer.commit(1)
    log = (table / "_delta_log" / "00000000000000000001.json").read_text().splitlines()
    add = next(json.loads(line)["add"] for line in log if "add" in json.loads(line))
    assert json.loads(add["stats"]) == {
        "numRecords": 2,
        "minValues": {"n": 3},
        "maxValues": {"n": 9},
        "nullCount": {"n": 0, "s": 1},
    }


def test_a_missing_deltalake_package_is_a_clear_error(table, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(SinkError, match=r"pip install 'barrierflow\[delta\]'"):
        DeltaSink.for_path(str(table)).prepare()


def test_file_dates_and_dead_letter_times_come_from_the_sink_context_clock(tmp_path):
    from barrierflow._clock import ManualClock

    clock = ManualClock(epoch_ms=1_700_000_000_000)
    sink = DeltaSink.for_path(tmp_path / "t").with_dead_letter_table(tmp_path / "dead")
    sink = sink.with_schema(pa.schema([("n", pa.int64())]))
    writer = sink.create_writer(SinkContext("out", 0, 1, 0, "run-0", job_name="j", clock=clock))
    writer.restore([])
    writer.write_batch([{"n": 1}, {"n": "two"}])
    writer.pre_commit(1)
    writer.commit(1)
    actions = pa.table(deltalake.DeltaTable(str(tmp_path / "t")).get_add_actions(flatten=True))
    (written,) = actions.column("modification_time").to_pylist()
    millis = written if isinstance(written, int) else int(written.timestamp() * 1000)
    assert millis == 1_700_000_000_000
    (letter,) = sink.dead_letters.committed_output()
    assert int(letter["failed_at"].timestamp() * 1000) == 1_700_000_000_000
