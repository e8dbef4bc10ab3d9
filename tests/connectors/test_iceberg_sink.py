"""IcebergSink's writers and committer driven event by event against a real SQLite-backed
Iceberg catalog in a tmp folder: two subtasks' files in one snapshot per checkpoint, each
carrying job and checkpoint in its summary; a crash after the files were written (swept, not
committed), after the commit before the acknowledgement (the repeated commit skipped), a
replayed committed checkpoint skipped; upserts, partitions, schema checks, dead letters."""

from __future__ import annotations

import datetime
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
from barrierflow.errors import ConfigurationError, SinkError

pytest.importorskip("pyiceberg")

JOB, LINEAGE = "ice-job", "00aa11bb22cc33dd"
SCHEMA = pa.schema([("word", pa.string()), ("n", pa.int64())])


@pytest.fixture
def warehouse(tmp_path: Path) -> dict[str, str]:
    return catalog_properties(tmp_path / "lake")


def sink_for(warehouse: dict[str, str], **options: Any) -> IcebergSink:
    sink = IcebergSink.for_table("db.words", warehouse).with_schema(SCHEMA, **options)
    sink.prepare()
    return sink


def writer(sink: IcebergSink, subtask: int = 0, parallelism: int = 2, run: str = "run1-0",
           states: list[Any] = ()) -> Any:  # fmt: skip
    """A subtask's writer of deployment `run`, restored from `states` (its own sink copy)."""
    context = SinkContext("ice", subtask, parallelism, 0, run, JOB, lineage=LINEAGE)
    made = sink._copy().create_writer(context)
    made.restore(list(states))
    return made


def state(made: Any) -> Any:
    """The writer's state as a checkpoint stores it."""
    return msgpack.unpackb(msgpack.packb(made.snapshot_state(), use_bin_type=True))


def rows(warehouse: dict[str, str]) -> Counter:
    return Counter((r["word"], r["n"]) for r in table_rows(warehouse, "db.words"))


def ours(warehouse: dict[str, str]) -> list[dict[str, str]]:
    return [s for s in snapshot_summaries(warehouse, "db.words") if "barrierflow.job" in s]


def test_two_subtasks_files_become_one_snapshot_per_checkpoint(warehouse):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}])
    second.write_batch([{"word": "b", "n": 2}, {"word": "c", "n": 3}])
    first.pre_commit(1)
    second.pre_commit(1)
    assert rows(warehouse) == Counter()  # written, not visible
    second.commit(1)  # a writer that is not the committer commits nothing
    assert rows(warehouse) == Counter()
    first.commit(1)
    assert rows(warehouse) == Counter({("a", 1): 1, ("b", 2): 1, ("c", 3): 1})
    [snapshot] = ours(warehouse)
    assert snapshot["barrierflow.job"] == JOB and snapshot["barrierflow.checkpoint"] == "1"
    assert snapshot["barrierflow.lineage"] == LINEAGE and snapshot["added-data-files"] == "2"
    second.write_batch([{"word": "d", "n": 4}])
    for made in (first, second):
        made.pre_commit(2)
    first.commit(2)
    second.commit(2)
    first.pre_commit(3)  # an empty checkpoint makes no snapshot
    second.pre_commit(3)
    first.commit(3)
    assert [s["barrierflow.checkpoint"] for s in ours(warehouse)] == ["1", "2"]
    assert sum(rows(warehouse).values()) == 4


def test_a_crash_after_the_files_were_written_commits_nothing_and_deletes_them(warehouse, tmp_path):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]
    first.commit(1)
    committed = parquet_files(tmp_path / "lake")
    first.write_batch([{"word": "lost", "n": 9}])
    second.write_batch([{"word": "lost", "n": 8}])
    first.pre_commit(2)  # both wrote their files for checkpoint 2 ...
    second.pre_commit(2)  # ... which never completes: the task is killed here
    assert len(parquet_files(tmp_path / "lake")) == len(committed) + 2
    again = [writer(sink, i, run="run1-1", states=[states[i]]) for i in (0, 1)]
    assert rows(warehouse) == Counter({("a", 1): 1})
    assert parquet_files(tmp_path / "lake") == committed  # the uncommitted files are gone
    assert not list((tmp_path / "lake").rglob("ck-*"))  # and every hand-off
    again[1].write_batch([{"word": "lost", "n": 8}])
    for made in again:
        made.pre_commit(3)
    again[0].commit(3)
    assert rows(warehouse) == Counter({("a", 1): 1, ("lost", 8): 1})


def test_a_crash_after_the_commit_before_the_acknowledgement_skips_the_repeat(warehouse):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}])
    second.write_batch([{"word": "b", "n": 2}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]  # checkpoint 1 holds both as pending
    first.commit(1)  # committed; the task dies before the checkpoint is acknowledged
    again = [writer(sink, i, run="run1-1", states=[states[i]]) for i in (0, 1)]
    assert rows(warehouse) == Counter({("a", 1): 1, ("b", 2): 1})
    assert len(ours(warehouse)) == 1
    again[0].commit(1)  # the replay of a committed checkpoint: skipped too
    assert len(ours(warehouse)) == 1


def test_a_restore_commits_a_completed_checkpoint_that_was_not_committed(warehouse, tmp_path):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    second.write_batch([{"word": "b", "n": 2}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]  # checkpoint 1 completed, then the crash
    again = [writer(sink, i, run="run1-1", states=[states[i]]) for i in (0, 1)]
    assert rows(warehouse) == Counter({("b", 2): 1})
    [snapshot] = ours(warehouse)
    assert snapshot["barrierflow.deployment"] == "run1-0"
    assert not list((tmp_path / "lake").rglob("ck-*"))
    assert again


def test_a_cancelled_checkpoint_one_subtask_prepared_comes_with_the_next(warehouse):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    second.write_batch([{"word": "b", "n": 2}])
    second.pre_commit(1)  # checkpoint 1 is cancelled before subtask 0's barrier
    first.write_batch([{"word": "a", "n": 1}])
    first.pre_commit(2)
    second.pre_commit(2)
    first.commit(2)
    second.commit(2)
    assert rows(warehouse) == Counter({("a", 1): 1, ("b", 2): 1})
    assert [s["barrierflow.checkpoint"] for s in ours(warehouse)] == ["2"]


def test_upserts_by_the_tables_identifier_fields(warehouse):
    sink = sink_for(warehouse, identifier_fields=["word"])
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}, {"word": "a", "n": 2}])
    second.write_batch([{"word": "b", "n": 1}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]
    first.commit(1)
    assert rows(warehouse) == Counter({("a", 2): 1, ("b", 1): 1})
    first.write_batch([{"word": "a", "n": 3}])
    first.pre_commit(2)
    second.pre_commit(2)
    first.commit(2)
    assert rows(warehouse) == Counter({("a", 3): 1, ("b", 1): 1})
    assert sink.survives_fallback()
    writer(sink, 0, run="run1-1", states=[states[0]])  # checkpoint 1 again: skipped
    assert rows(warehouse) == Counter({("a", 3): 1, ("b", 1): 1})


def test_a_partitioned_table_gets_a_file_per_partition(warehouse, tmp_path):
    sink = IcebergSink.for_table("db.words", warehouse).with_schema(SCHEMA).partition_by("word")
    sink.prepare()
    made = writer(sink, 0, parallelism=1)
    made.write_batch([{"word": w, "n": i} for i, w in enumerate("abab")])
    made.pre_commit(1)
    made.commit(1)
    assert rows(warehouse) == Counter({("a", 0): 1, ("b", 1): 1, ("a", 2): 1, ("b", 3): 1})
    folders = {Path(p).parent.name for p in parquet_files(tmp_path / "lake")}
    assert folders == {"word=a", "word=b"}


try:
    import pyiceberg_core  # noqa: F401  # computes bucket, truncate and time transforms

    CORE = True
except ImportError:
    CORE = False


@pytest.mark.parametrize("transform", ["identity", "day", "bucket[4]", "truncate[1]"])
def test_a_table_partitioned_by_a_transform_is_written_or_refused_before_the_job_runs(
    warehouse, tmp_path, transform
):
    """A table made elsewhere with a partition spec: identity always works; bucket, truncate
    and the time transforms need pyiceberg-core, refused on the driver without it (it was
    a failure at the first checkpoint)."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import parse_transform
    from pyiceberg.types import LongType, NestedField, StringType, TimestampType

    catalog = load_catalog("default", **warehouse)
    catalog.create_namespace_if_not_exists("db")
    columns = [("word", StringType()), ("n", LongType()), ("ts", TimestampType())]
    schema = Schema(*(NestedField(i, c, t, required=False) for i, (c, t) in enumerate(columns, 1)))
    source = 3 if transform == "day" else 1
    spec = PartitionSpec(PartitionField(source, 1000, parse_transform(transform), "part"))
    catalog.create_table("db.parted", schema, partition_spec=spec)
    sink = IcebergSink.for_table("db.parted", warehouse)
    if transform != "identity" and not CORE:
        with pytest.raises(SinkError, match=r"partition field 'part' .*pyiceberg-core"):
            sink.prepare()
        return
    sink.prepare()
    made = writer(sink, 0, parallelism=1)
    day = datetime.datetime(2024, 1, 1, 5)
    batch = [
        {"word": "ab", "n": 1, "ts": day},
        {"word": "cd", "n": 2, "ts": day + datetime.timedelta(days=1)},
    ]
    made.write_batch(batch)
    made.pre_commit(1)
    made.commit(1)
    assert sorted(r["n"] for r in table_rows(warehouse, "db.parted")) == [1, 2]
    assert len({Path(p).parent for p in parquet_files(tmp_path / "lake")}) == 2


def test_bad_configuration_and_rows_say_what_is_wrong_in_one_line(warehouse):
    with pytest.raises(ConfigurationError, match=r"'namespace\.name'"):
        IcebergSink.for_table("words", warehouse)
    with pytest.raises(SinkError, match=r"'db\.missing' does not exist"):
        IcebergSink.for_table("db.missing", warehouse).prepare()
    sink_for(warehouse)
    other = pa.schema([("word", pa.string()), ("n", pa.string())])
    with pytest.raises(SinkError, match="column 'n' is long in the table, string"):
        IcebergSink.for_table("db.words", warehouse).with_schema(other).prepare()
    extra = pa.schema([("word", pa.string()), ("m", pa.int64())])
    with pytest.raises(SinkError, match="the table has no column 'm'"):
        IcebergSink.for_table("db.words", warehouse).with_schema(extra).prepare()
    made = writer(IcebergSink.for_table("db.words", warehouse), 0, parallelism=1)
    with pytest.raises(SinkError, match=r"row 1 of the batch .* column 'n' of type int64"):
        made.write_batch([{"word": "a", "n": 1}, {"word": "b", "n": "two"}])


def test_rows_that_do_not_fit_go_to_the_dead_letter_table_in_the_same_commit(warehouse):
    sink = sink_for(warehouse).with_dead_letter_table("db.words_rejected")
    sink.prepare()
    made = writer(sink, 0, parallelism=1)
    made.write_batch([{"word": "a", "n": 1}, {"word": "b", "n": "two"}, {"x": 1}, {"word": "c"}])
    made.pre_commit(1)
    saved = state(made)
    made.commit(1)
    assert rows(warehouse) == Counter({("a", 1): 1, ("c", None): 1})
    letters = table_rows(warehouse, "db.words_rejected")
    assert sorted((r["row"], r["error"][:20]) for r in letters) == [
        ('{"word": "b", "n": "two"}', "column 'n' of type i"),
        ('{"x": 1}', "column 'x' is not in"),
    ]
    writer(sink, 0, parallelism=1, run="run1-1", states=[saved])  # repeated: skipped
    assert len(table_rows(warehouse, "db.words_rejected")) == 2


def test_a_crash_between_the_snapshot_and_the_cleanup_skips_the_repeat(warehouse, monkeypatch):
    from barrierflow.connectors.iceberg import _staging

    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}])
    second.write_batch([{"word": "b", "n": 2}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]

    def killed(*args: Any) -> None:
        raise RuntimeError("killed after the snapshot, before the hand-offs are deleted")

    with monkeypatch.context() as patched:
        patched.setattr(_staging, "delete_tree", killed)
        with pytest.raises(RuntimeError, match="killed"):
            first.commit(1)
    again = [writer(sink, i, run="run1-1", states=[states[i]]) for i in (0, 1)]
    assert rows(warehouse) == Counter({("a", 1): 1, ("b", 2): 1})
    assert len(ours(warehouse)) == 1
    assert again


def test_duckdb_reads_the_committed_table_through_pyiceberg(warehouse):
    pytest.importorskip("duckdb")
    sink = sink_for(warehouse)
    made = writer(sink, 0, parallelism=1)
    made.write_batch([{"word": "a", "n": 1}, {"word": "a", "n": 2}, {"word": "b", "n": 5}])
    made.pre_commit(1)
    made.commit(1)
    from support.iceberg_catalog import open_catalog

    table = open_catalog(warehouse).load_table("db.words")
    con = table.scan().to_duckdb("words")
    assert con.sql("SELECT word, max(n) FROM words GROUP BY word ORDER BY word").fetchall() == [
        ("a", 2),
        ("b", 5),
    ]


class RunTables:
    """A placement as `barrierflow chaos` installs one: each run writes its own table."""

    def __init__(self, run: str, keeps: bool = False) -> None:
        self.run, self.keeps = run, keeps

    def location(self, path: str) -> str:
        return path

    def table(self, table: str) -> str:
        return f"{table}__{self.run}"

    def pace(self, rate: float | None) -> float | None:
        return rate

    @property
    def keeps_tables(self) -> bool:
        return self.keeps


def test_under_chaos_each_run_writes_its_own_table_like_the_named_one(warehouse):
    from barrierflow.connectors.placement import placed

    sink_for(warehouse, identifier_fields=["word"])  # the named table, keyed
    with placed(RunTables("chaos")):
        sink = IcebergSink.for_table("db.words", warehouse)
    assert sink.table == "db.words__chaos"
    sink.prepare()  # created empty, like db.words
    made = writer(sink, 0, parallelism=1)
    made.write_batch([{"word": "a", "n": 1}, {"word": "a", "n": 2}])
    made.pre_commit(1)
    made.commit(1)
    assert sink.committed_output() == [{"word": "a", "n": 2}]  # upserted, keys kept
    assert rows(warehouse) == Counter()  # the named table untouched
    with placed(RunTables("chaos", keeps=True)):
        IcebergSink.for_table("db.words", warehouse).prepare()  # a continued run keeps it
    assert sink.committed_output() == [{"word": "a", "n": 2}]
    with placed(RunTables("chaos")):
        IcebergSink.for_table("db.words", warehouse).prepare()  # a new run starts empty
    assert sink.committed_output() == []


def test_under_chaos_a_new_run_starts_its_dead_letter_table_empty(warehouse):
    from barrierflow.connectors.placement import placed

    sink_for(warehouse)
    with placed(RunTables("chaos")):
        sink = IcebergSink.for_table("db.words", warehouse).with_dead_letter_table("db.rej")
    assert sink.dead_letter_table == "db.rej__chaos"
    sink.prepare()
    made = writer(sink, 0, parallelism=1)
    made.write_batch([{"word": "a", "n": "x"}])
    made.pre_commit(1)
    made.commit(1)
    assert len(table_rows(warehouse, "db.rej__chaos")) == 1
    sink.prepare()  # the next run (not a continued one) starts empty
    assert table_rows(warehouse, "db.rej__chaos") == []


def test_a_rescale_to_one_subtask_commits_both_old_subtasks_files_once(warehouse, tmp_path):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}])
    second.write_batch([{"word": "b", "n": 2}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]  # checkpoint 1 completed, not committed
    second.write_batch([{"word": "lost", "n": 3}])
    second.pre_commit(2)  # never completes
    alone = writer(sink, 0, parallelism=1, run="run1-1", states=states)
    assert rows(warehouse) == Counter({("a", 1): 1, ("b", 2): 1})
    assert len(ours(warehouse)) == 1
    assert not list((tmp_path / "lake").rglob("ck-*"))
    assert len(parquet_files(tmp_path / "lake")) == 2  # the file of checkpoint 2 is gone
    assert alone


def test_a_savepoint_restored_into_new_storage_commits_its_pending_checkpoint_once(warehouse):
    sink = sink_for(warehouse)
    first, second = writer(sink, 0), writer(sink, 1)
    first.write_batch([{"word": "a", "n": 1}])
    second.write_batch([{"word": "b", "n": 2}])
    first.pre_commit(1)
    second.pre_commit(1)
    states = [state(first), state(second)]  # a savepoint, not committed yet

    def moved(subtask: int) -> Any:  # a new checkpoint folder: a new lineage
        context = SinkContext("ice", subtask, 2, 0, "run2-0", JOB, lineage="ffee00")
        made = sink._copy().create_writer(context)
        made.restore([states[subtask]])
        return made

    again = [moved(0), moved(1)]
    assert rows(warehouse) == Counter({("a", 1): 1, ("b", 2): 1})
    [snapshot] = ours(warehouse)
    assert snapshot["barrierflow.lineage"] == LINEAGE  # named by the run that wrote it
    again.append(moved(0))  # restored from the savepoint once more: skipped
    assert len(ours(warehouse)) == 1
