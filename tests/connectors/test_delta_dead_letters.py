"""DeltaSink with a dead-letter table: rows that do not fit go there with their error, in the
same checkpoint's commit step, exactly once (their own application transaction)."""

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
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("item", pa.string())])
GOOD = [{"id": 1, "item": "apple"}, {"id": 2, "item": "pear"}]
BAD = [{"id": "three", "item": "plum"}, {"id": 4, "colour": "red"}, "not a row", {"item": "x"}]


def new_writer(sink: DeltaSink, restore=(), deployment="run1-0", restored=None):
    """A task's writer: its own (pickled) copy of the sink, restored from checkpointed states."""
    task_sink = pickle.loads(pickle.dumps(sink))
    writer = task_sink.create_writer(SinkContext("out", 0, 1, 0, deployment, JOB, restored))
    writer.restore([msgpack.unpackb(msgpack.packb(s), raw=False) for s in restore])
    return writer


def rows(table: Path) -> list[dict]:
    committed = DeltaSink.for_path(str(table)).committed_output()
    return sorted(committed, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def commits(table: Path) -> list[tuple[str, int]]:
    found = []
    for entry in sorted((table / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found.append((action["txn"]["appId"], action["txn"]["version"]))
    return found


@pytest.fixture
def tables(tmp_path) -> tuple[Path, Path]:
    return tmp_path / "orders", tmp_path / "rejected"


@pytest.fixture
def sink(tables) -> DeltaSink:
    table, rejected = tables
    configured = DeltaSink.for_path(str(table)).with_schema(SCHEMA)
    configured = configured.with_dead_letter_table(str(rejected))
    configured.prepare()
    return configured


def test_prepare_creates_the_dead_letter_table_with_its_columns(sink, tables):
    schema = pa.schema(deltalake.DeltaTable(str(tables[1])).schema().to_arrow())
    assert schema.names == ["sink", "row", "error", "failed_at"]
    assert schema.field("failed_at").type == pa.timestamp("us", tz="UTC")


def test_rows_that_do_not_fit_go_to_the_dead_letter_table_with_their_error(sink, tables):
    table, rejected = tables
    writer = new_writer(sink)
    writer.write_batch([GOOD[0], *BAD, GOOD[1]])
    writer.pre_commit(1)
    assert rows(table) == [] and rows(rejected) == []  # invisible until the checkpoint completes
    writer.commit(1)

    assert rows(table) == GOOD
    letters = sorted(rows(rejected), key=lambda r: r["row"])
    assert {letter["sink"] for letter in letters} == {"out"}
    assert all(letter["failed_at"].tzinfo is not None for letter in letters)
    errors = {r["row"]: r["error"] for r in letters}
    assert sorted(errors) == sorted(json.dumps(row) for row in BAD)
    assert errors[json.dumps(BAD[0])].startswith("field 'id' of type int64 cannot hold 'three'")
    assert errors[json.dumps(BAD[1])] == "field 'colour' is not in the table"
    assert errors[json.dumps(BAD[2])] == "a row must be a dict"
    assert errors[json.dumps(BAD[3])] == "field 'id' may not be null"
    assert commits(table) == [(f"{JOB}/out/0", 1)]
    assert commits(rejected) == [(f"{JOB}/out/0", 1)]


def test_a_checkpoint_without_dead_letters_makes_no_dead_letter_commit(sink, tables):
    writer = new_writer(sink)
    writer.write_batch(GOOD)
    writer.pre_commit(1)
    writer.commit(1)
    writer.write_batch(BAD[:1])
    writer.pre_commit(2)
    writer.commit(2)
    assert commits(tables[0]) == [(f"{JOB}/out/0", 1)]
    assert commits(tables[1]) == [(f"{JOB}/out/0", 2)]


def test_dead_letters_are_exactly_once_across_a_failure_before_and_after_the_commit(sink, tables):
    table, rejected = tables
    writer = new_writer(sink)
    writer.write_batch([GOOD[0], BAD[0]])
    writer.pre_commit(1)
    state = writer.snapshot_state()
    writer.write_batch([GOOD[1], BAD[1]])  # open when the task dies: replayed, never committed

    # Dies before checkpoint 1's commit: the restore commits it, once, in both tables.
    again = new_writer(sink, [state], deployment="run1-1", restored=1)
    assert rows(table) == [GOOD[0]] and len(rows(rejected)) == 1
    # Dies again after that commit: restoring the same checkpoint commits nothing twice.
    third = new_writer(sink, [state], deployment="run1-2", restored=1)
    third.write_batch([GOOD[1], BAD[1]])
    third.pre_commit(2)
    third.commit(2)
    again.abort()

    assert rows(table) == GOOD
    assert sorted(r["row"] for r in rows(rejected)) == sorted(json.dumps(r) for r in BAD[:2])
    assert commits(rejected) == [(f"{JOB}/out/0", 1), (f"{JOB}/out/0", 2)]


def test_the_open_transactions_dead_letter_files_are_deleted_on_abort(sink, tables):
    writer = new_writer(sink)
    writer.write_batch(BAD[:1])
    writer.pre_commit(1)
    files = sorted(tables[1].rglob("*.parquet"))
    assert len(files) == 1
    state = writer.snapshot_state()
    restored = new_writer(sink, [{**state, "pending": [], "open": state["pending"][0][1]}])
    restored.abort()
    assert sorted(tables[1].rglob("*.parquet")) == []
    assert rows(tables[1]) == []


def test_without_a_dead_letter_table_a_misfit_still_fails_naming_the_row(tables):
    plain = DeltaSink.for_path(str(tables[0])).with_schema(SCHEMA)
    plain.prepare()
    writer = new_writer(plain)
    with pytest.raises(SinkError, match=r"row 1 of the batch does not fit the table: field 'id'"):
        writer.write_batch([GOOD[0], BAD[0]])


def test_a_restored_checkpoint_with_dead_letters_needs_the_dead_letter_table(sink, tables):
    writer = new_writer(sink)
    writer.write_batch(BAD[:1])
    writer.pre_commit(1)
    state = writer.snapshot_state()
    plain = DeltaSink.for_path(str(tables[0])).with_schema(SCHEMA)
    with pytest.raises(SinkError, match="with_dead_letter_table"):
        new_writer(plain, [state], deployment="run1-1", restored=1)


def test_inferred_schemas_skip_rows_that_are_not_dicts(tables):
    sink = DeltaSink.for_path(str(tables[0])).with_dead_letter_table(str(tables[1]))
    writer = new_writer(sink)
    writer.write_batch(["first, not a dict", {"n": 1}])
    writer.pre_commit(1)
    writer.commit(1)
    assert rows(tables[0]) == [{"n": 1}]
    assert [r["row"] for r in rows(tables[1])] == ['"first, not a dict"']
