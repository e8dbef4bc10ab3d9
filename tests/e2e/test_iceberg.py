"""Iceberg on Spark: a keyed count into an Iceberg table with a sink task killed holds exactly
the failure-free run's rows, one snapshot per committed checkpoint, and no data file that no
snapshot lists; an IcebergSource follows a table another writer appends to while the job runs.

Spark reads the table's current data files (`plan_files()`) as Parquet: the
iceberg-spark-runtime jar, which `spark.read.format("iceberg")` needs, cannot be fetched
here (docs/connectors/iceberg.md says how to read it with the jar)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from support.iceberg_catalog import catalog_properties, open_catalog, snapshot_summaries

from barrierflow import WatermarkStrategy
from barrierflow.connectors.files import FileSink
from barrierflow.connectors.iceberg import IcebergSink, IcebergSource

from .conftest import read_rows
from .jobs import (
    DEPLOY_S,
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host

pytest.importorskip("pyiceberg")

RECORDS = 2_000
SCHEMA = pa.schema([("word", pa.string()), ("count", pa.int64())])


def test_a_killed_sink_task_leaves_exactly_the_failure_free_rows(spark, tmp_path: Path):
    props = catalog_properties(tmp_path / "lake")
    env = recovering_environment(tmp_path / "checkpoints")
    words = generated_words(env, RECORDS, 2000, gate=tmp_path / "failed")
    sink = IcebergSink.for_table("db.counts", props).with_schema(SCHEMA)
    running_counts(words).map(lambda p: {"word": p[0], "count": p[1]}).uid("row").sink_to(sink).uid(
        "iceberg"
    )
    job = env.execute_async("iceberg-counts")
    assert job.wait_for_completed_checkpoints(2, timeout=DEPLOY_S)
    sink_vertex = next(v.vertex_id for v in job.job_graph.vertices if "Sink" in v.name)
    job.inject_failure("kill", sink_vertex, 1)
    wait_for_attempt(job, 1, timeout=60)
    (tmp_path / "failed").touch()
    result = job.wait(timeout=DEPLOY_S)

    assert result.restarts >= 1
    table = open_catalog(props).load_table("db.counts")
    files = [task.file.file_path for task in table.scan().plan_files()]
    read_by_spark = spark.read.parquet(*files).collect()
    expected = running_count_rows(word_of(i) for i in range(RECORDS))
    assert Counter((row["word"], row["count"]) for row in read_by_spark) == expected
    checkpoints = [s["barrierflow.checkpoint"] for s in snapshot_summaries(props, "db.counts")]
    assert len(checkpoints) == len(set(checkpoints))  # one snapshot per checkpoint
    on_disk = {f"file://{p}" for p in (tmp_path / "lake").rglob("*.parquet")}
    assert on_disk == set(files)  # no file of an uncommitted interval is left
    assert not list((tmp_path / "lake").rglob("ck-*"))  # nor any hand-off


def test_the_source_follows_a_table_another_writer_appends_to(spark, tmp_path: Path):
    props = catalog_properties(tmp_path / "lake")
    catalog = open_catalog(props)
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", pa.schema([("n", pa.int64())]))
    table.append(pa.table({"n": list(range(0, 100))}))
    env = recovering_environment(tmp_path / "checkpoints")
    env.set_parallelism(1)
    source = IcebergSource.for_table("db.events", props).monitor_interval(0.2)
    out = tmp_path / "out"
    env.from_source(source, WatermarkStrategy.no_watermarks(), "events").uid("events").map(
        lambda row: row["n"]
    ).uid("n").sink_to(FileSink.for_rows(str(out))).uid("files")
    job = env.execute_async("iceberg-follow")
    try:
        assert job.wait_for_completed_checkpoints(1, timeout=DEPLOY_S)
        for start in (100, 200, 300):  # another writer appends while the job runs
            table.append(pa.table({"n": list(range(start, start + 100))}))
        deadline, checkpoints = time.monotonic() + 60, 2
        while sum(read_rows(out).values()) < 400:  # committed at each checkpoint
            assert time.monotonic() < deadline, f"{sum(read_rows(out).values())} rows of 400"
            job.wait_for_completed_checkpoints(checkpoints, timeout=5)
            checkpoints += 1
    finally:
        job.cancel().result(timeout=60)
    assert read_rows(out) == Counter(range(400))
