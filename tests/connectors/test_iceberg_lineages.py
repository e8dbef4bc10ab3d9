"""IcebergSink's sweep across lineages, event by event against a real SQLite-backed catalog.

A run hands files over under its own lineage's folder. When a later run restores from a
savepoint into new storage (a new lineage), or restores an older savepoint again after
another lineage ran from it, what the abandoned lineage handed over and never committed
must be deleted by the new run's committer, its data files too; what it committed stays
and is never committed again.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import msgpack
import pyarrow as pa
import pytest
from support.iceberg_catalog import (
    catalog_properties,
    parquet_files,
    snapshot_summaries,
    table_rows,
)

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.iceberg import IcebergSink

pytest.importorskip("pyiceberg")

JOB = "ice-job"
SCHEMA = pa.schema([("word", pa.string()), ("n", pa.int64())])


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def sink(lake: Path) -> IcebergSink:
    made = IcebergSink.for_table("db.words", catalog_properties(lake)).with_schema(SCHEMA)
    made.prepare()
    return made


def run(sink: IcebergSink, lineage: str, deployment: str, states: list[Any] = ()) -> list[Any]:
    """Two subtasks' writers of one deployment of `lineage`, restored from `states`."""
    writers = []
    for subtask in (0, 1):
        context = SinkContext("ice", subtask, 2, 0, deployment, JOB, lineage=lineage)
        made = sink._copy().create_writer(context)
        made.restore([states[subtask]] if states else [])
        writers.append(made)
    return writers


def checkpoint(writers: list[Any], checkpoint_id: int, *words: str) -> list[Any]:
    """Each word to subtask 0 and 1 in turn, then the barrier: the states it stores."""
    for index, word in enumerate(words):
        writers[index % 2].write_batch([{"word": word, "n": checkpoint_id}])
    for made in writers:
        made.pre_commit(checkpoint_id)
    return [msgpack.unpackb(msgpack.packb(w.snapshot_state(), use_bin_type=True)) for w in writers]


def rows(sink: IcebergSink) -> Counter:
    return Counter(r["word"] for r in table_rows(sink.catalog_properties, "db.words"))


def committed(sink: IcebergSink) -> list[tuple[str, str]]:
    return [
        (s["barrierflow.lineage"], s["barrierflow.checkpoint"])
        for s in snapshot_summaries(sink.catalog_properties, "db.words")
        if "barrierflow.job" in s
    ]


def hand_offs(lake: Path) -> list[str]:
    """What is left under the hand-off folder: lineage roots and checkpoint folders."""
    base = next(lake.rglob("metadata/barrierflow"), None)
    return sorted(str(p.relative_to(base)) for p in base.rglob("*")) if base else []


def table_files(sink: IcebergSink) -> set[str]:
    """The data files the table's current snapshot lists."""
    from pyiceberg.catalog import load_catalog

    table = load_catalog("default", **sink.catalog_properties).load_table("db.words")
    return {task.file.file_path.removeprefix("file://") for task in table.scan().plan_files()}


def test_a_savepoint_restored_elsewhere_sweeps_what_its_old_lineage_never_committed(sink, lake):
    old = run(sink, "aa01", "a-0")
    checkpoint(old, 1, "one")
    old[0].commit(1)
    savepoint = checkpoint(old, 2, "two", "three")  # completed, not committed yet
    checkpoint(old, 3, "lost", "gone")  # the old run goes on, then dies before completing 3
    assert len(parquet_files(lake)) == 5

    new = run(sink, "bb02", "b-0", savepoint)  # the savepoint, in new storage

    assert rows(sink) == Counter({"one": 1, "two": 1, "three": 1})
    assert committed(sink) == [("aa01", "1"), ("aa01", "2")]
    assert parquet_files(lake) == table_files(sink)  # checkpoint 3's data files are gone
    assert all(not h.startswith("aa01") for h in hand_offs(lake))  # and its hand-offs
    checkpoint(new, 4, "four")
    new[0].commit(4)
    assert rows(sink) == Counter({"one": 1, "two": 1, "three": 1, "four": 1})
    assert parquet_files(lake) == table_files(sink)


def test_restoring_a_savepoint_again_sweeps_the_lineage_that_ran_from_it_before(sink, lake):
    old = run(sink, "aa01", "a-0")
    savepoint = checkpoint(old, 1, "one", "two")  # completed, not committed

    first = run(sink, "bb02", "b-0", savepoint)  # commits the savepoint's checkpoint
    checkpoint(first, 2, "kept")
    first[0].commit(2)
    checkpoint(first, 3, "lost", "gone")  # pre-committed, then this run is abandoned
    assert len(parquet_files(lake)) == 5

    again = run(sink, "cc03", "c-0", savepoint)  # the same savepoint, restored once more

    assert rows(sink) == Counter({"one": 1, "two": 1, "kept": 1})  # nothing twice
    assert committed(sink) == [("aa01", "1"), ("bb02", "2")]
    assert parquet_files(lake) == table_files(sink)
    assert hand_offs(lake) == sorted(
        h for h in hand_offs(lake) if h.startswith("cc03")
    )  # only the new lineage's own folder
    checkpoint(again, 2, "new")  # checkpoint ids of a new lineage may repeat another's
    again[0].commit(2)
    assert rows(sink) == Counter({"one": 1, "two": 1, "kept": 1, "new": 1})
    assert committed(sink)[-1] == ("cc03", "2")
    assert parquet_files(lake) == table_files(sink)


def test_a_lineage_of_another_job_or_sink_is_not_touched(sink, lake):
    other = IcebergSink.for_table("db.words", sink.catalog_properties)
    writers = []
    for subtask in (0, 1):
        context = SinkContext("ice", subtask, 2, 0, "x-0", "another-job", lineage="dd04")
        made = other.create_writer(context)
        made.restore([])
        writers.append(made)
    checkpoint(writers, 1, "theirs")  # in flight: written, checkpoint not completed yet

    run(sink, "ee05", "e-0")

    writers[0].commit(1)
    assert rows(sink) == Counter({"theirs": 1})
