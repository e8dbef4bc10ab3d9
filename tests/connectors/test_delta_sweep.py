"""DeltaSink's restore deletes the data files of transactions that never committed (issue 21,
item 4), on real Delta tables and real files: the files of an interval whose checkpoint
never completed go, files any Delta commit referenced stay (also once taken back), files of
other lineages, sinks and old names stay, and after a rescale the new owner sweeps an old
subtask's files."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.delta import DeltaSink

deltalake = pytest.importorskip("deltalake")

JOB = "sweep-job"
LINEAGE, OTHER = "0123456789abcdef", "fedcba9876543210"


def context(
    subtask: int = 0,
    parallelism: int = 1,
    deployment: str = "run1-0",
    lineage: str = LINEAGE,
    abandoned_above: int | None = None,
    uid: str = "out",
) -> SinkContext:
    return SinkContext(
        uid, subtask, parallelism, 0, deployment, JOB,
        lineage=lineage, abandoned_above=abandoned_above, max_parallelism=8,
    )  # fmt: skip


def restored(sink: DeltaSink, states: list[Any] = (), **kwargs: Any) -> Any:
    """A writer of a new attempt (its own copy of the sink), restored from `states`."""
    writer = sink._copy().create_writer(context(**kwargs))
    writer.restore(list(states))
    return writer


def snapshot(writer: Any) -> Any:
    """The writer's state as a checkpoint holds it: encoded now (later steps change the live
    handles)."""
    return msgpack.unpackb(msgpack.packb(writer.snapshot_state(), use_bin_type=True))


def killed_run(sink: DeltaSink, subtask: int = 0, **kwargs: Any) -> Any:
    """A subtask that commits checkpoint 1, pre-commits checkpoint 2 (never completes), has
    rows of its open transaction written early (big buffers), and is killed without aborting
    anything. Returns its state at checkpoint 1."""
    writer = restored(sink, subtask=subtask, **kwargs)
    writer.write_batch([{"s": subtask, "n": 1}])
    writer.pre_commit(1)
    state = snapshot(writer)
    writer.commit(1)
    writer.write_batch([{"s": subtask, "n": 2}])
    writer.pre_commit(2)
    writer.write_batch([{"s": subtask, "n": 3}])  # target_file_size=1: a file at once
    return state


def data_files(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.parquet")}


def listed_files(table: Path, version: int | None = None) -> set[str]:
    """The files the table lists (at `version`: time travel), relative to the table."""
    delta = deltalake.DeltaTable(str(table), version=version)
    return {str(Path(uri).relative_to(table)) for uri in delta.file_uris()}


def rows(sink: DeltaSink) -> list[tuple[int, int]]:
    return sorted((row["s"], row["n"]) for row in sink.committed_output())


@pytest.mark.parametrize("partitioned", [False, True])
def test_the_files_of_intervals_that_never_committed_go_at_the_next_restore(tmp_path, partitioned):
    table = tmp_path / "t"
    sink = DeltaSink(str(table), target_file_size=1)
    if partitioned:
        sink = sink.partition_by("n")
    state = killed_run(sink)
    assert len(data_files(table)) == 3 and len(listed_files(table)) == 1

    restored(sink, [state], deployment="run1-1").abort()

    assert data_files(table) == listed_files(table)
    assert rows(sink) == [(0, 1)]


def test_a_restore_without_state_sweeps_too_and_keeps_every_committed_file(tmp_path):
    table = tmp_path / "t"
    sink = DeltaSink(str(table), target_file_size=1)
    killed_run(sink)
    first = restored(sink, deployment="run2-0")  # a fresh start of the same lineage
    assert data_files(table) == listed_files(table)
    first.write_batch([{"s": 0, "n": 4}])
    first.pre_commit(5)
    first.commit(5)
    first.write_batch([{"s": 0, "n": 5}])  # killed again, with a file of interval 6

    restored(sink, deployment="run3-0").abort()

    assert data_files(table) == listed_files(table)
    assert rows(sink) == [(0, 1), (0, 4)]


def test_taken_back_files_stay_for_time_travel_and_orphans_above_them_go(tmp_path):
    table = tmp_path / "t"
    sink = DeltaSink(str(table))
    writer = restored(sink)
    for n in (1, 2, 3):
        writer.write_batch([{"s": 0, "n": n}])
        writer.pre_commit(n)
        writer.commit(n)
    before_take_back = deltalake.DeltaTable(str(table)).version()
    writer.write_batch([{"s": 0, "n": 4}])
    writer.pre_commit(4)  # never completes
    committed = listed_files(table)

    # A fallback to checkpoint 1: 2 and 3 are taken back (removed by a Delta commit).
    restored(sink, deployment="run1-1", abandoned_above=1).abort()

    assert rows(sink) == [(0, 1)]
    assert data_files(table) == committed  # 4's file gone, 2's and 3's kept
    assert listed_files(table, before_take_back) == committed  # time travel still reads
    restored(sink, deployment="run1-2").abort()  # the next restore: still kept
    assert data_files(table) == committed


def test_files_an_optimize_compacted_away_stay_until_vacuum(tmp_path):
    table = tmp_path / "t"
    sink = DeltaSink(str(table))
    writer = restored(sink)
    for n in (1, 2, 3):
        writer.write_batch([{"s": 0, "n": n}])
        writer.pre_commit(n)
        writer.commit(n)
    ours = data_files(table)
    deltalake.DeltaTable(str(table)).optimize.compact()
    assert listed_files(table).isdisjoint(ours)  # one new file replaced ours

    restored(sink, deployment="run1-1").abort()

    assert data_files(table) == ours | listed_files(table)
    assert rows(sink) == [(0, 1), (0, 2), (0, 3)]


def test_files_of_other_lineages_sinks_and_old_names_stay(tmp_path):
    table = tmp_path / "t"
    sink = DeltaSink(str(table), target_file_size=1)
    killed_run(sink, lineage=OTHER)
    killed_run(sink, uid="other-sink")
    killed_run(sink, lineage="")  # a writer without a lineage: the names from before
    everything = data_files(table)
    assert len(everything) == 9

    restored(sink, deployment="run1-1").abort()

    assert data_files(table) == everything


def test_after_a_rescale_the_new_owner_sweeps_an_old_subtasks_files(tmp_path):
    table = tmp_path / "t"
    sink = DeltaSink(str(table), target_file_size=1)
    states = [killed_run(sink, subtask, parallelism=2) for subtask in (0, 1)]
    assert len(data_files(table)) == 6

    # At parallelism 2, subtask 0 owns only subtask 0's leftovers.
    restored(sink, [states[0]], deployment="run1-1", parallelism=2).abort()
    assert len(data_files(table)) == 4 and len(listed_files(table)) == 2

    restored(sink, states, deployment="run2-0", parallelism=1).abort()  # rescaled to 1

    assert data_files(table) == listed_files(table)
    assert rows(sink) == [(0, 1), (1, 1)]


def test_the_dead_letter_tables_uncommitted_files_go_too(tmp_path):
    table, rejected = tmp_path / "t", tmp_path / "rejected"
    schema = pa.schema([("s", pa.int64()), ("n", pa.int64())])
    sink = DeltaSink.for_path(str(table)).with_schema(schema)
    sink = sink.with_dead_letter_table(str(rejected))
    sink.prepare()
    writer = restored(sink)
    writer.write_batch([{"s": 0, "n": 1}, {"s": "bad"}])
    writer.pre_commit(1)
    state = snapshot(writer)
    writer.commit(1)
    writer.write_batch([{"s": 0, "n": 2}, {"s": "worse"}])
    writer.pre_commit(2)  # never completes: a file in each table
    assert len(data_files(rejected)) == 2

    restored(sink, [state], deployment="run1-1").abort()

    assert data_files(table) == listed_files(table)
    assert data_files(rejected) == listed_files(rejected)
    [letter] = sink.dead_letters.committed_output()
    assert json.loads(letter["row"]) == {"s": "bad"}


def test_uncommitted_files_in_a_bucket_go_at_the_next_restore(s3_server):
    from support.s3_server import ACCESS_KEY, REGION, SECRET_KEY

    options = {
        "AWS_ENDPOINT_URL": f"http://{s3_server.endpoint}",
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }
    uri = f"s3://{s3_server.bucket}/sweep-{uuid.uuid4().hex[:12]}"
    sink = DeltaSink(uri, storage_options=options, target_file_size=1).partition_by("n")
    state = killed_run(sink)
    assert len(sink._copy()._data_files()) == 3

    restored(sink, [state], deployment="run1-1").abort()

    remaining = sink._copy()._data_files()
    delta = deltalake.DeltaTable(uri, storage_options=options)
    assert [p.rpartition("/")[0] for p in remaining] == ["n=1"]
    assert {uri.rstrip("/") + "/" + p for p in remaining} == set(delta.file_uris())
    assert rows(sink) == [(0, 1)]
