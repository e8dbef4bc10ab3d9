"""A job appending to a Delta table recovers from a killed task exactly once: the table, read
back with PySpark, holds every row once, and its log has at most one commit per completed
checkpoint and subtask.

PySpark reads the table's current Parquet files (`DeltaTable(path).file_uris()`), since the
delta-spark jars cannot be fetched here; with delta-spark on the classpath
`spark.read.format("delta").load(path)` reads the same rows.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.connectors.delta import DeltaSink

from .jobs import (
    delta_app_transactions,
    generated_words,
    recovering_environment,
    running_count_rows,
    running_counts,
    wait_for_attempt,
    word_of,
)

pytestmark = pytest.mark.spark

deltalake = pytest.importorskip("deltalake")

RECORDS = 6_000


def counting_job(tmp_path: Path) -> tuple[StreamExecutionEnvironment, Path]:
    """A keyed running count of generated words, each update a row {"word", "count"}."""
    table = tmp_path / "counts"
    env = recovering_environment(tmp_path / "checkpoints")
    running_counts(generated_words(env, RECORDS, 2000, gate=tmp_path / "failed")).map(
        lambda pair: {"word": pair[0], "count": pair[1]}
    ).uid("to-row").sink_to(DeltaSink.for_path(str(table))).uid("delta")
    return env, table


def test_a_killed_task_leaves_every_row_in_the_delta_table_exactly_once(spark, tmp_path):
    env, table = counting_job(tmp_path)
    job = env.execute_async("delta-counts")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    sink_vertex = next(v.vertex_id for v in job.job_graph.vertices if "Sink" in v.name)
    job.inject_failure("kill", sink_vertex, 1)
    wait_for_attempt(job, 1, timeout=60)
    (tmp_path / "failed").touch()  # the rest of the input runs at full pace
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    expected = running_count_rows(word_of(i) for i in range(RECORDS))
    files = deltalake.DeltaTable(str(table)).file_uris()
    read_by_spark = spark.read.parquet(*files).collect()
    assert Counter((row["word"], row["count"]) for row in read_by_spark) == expected
    # no data file is left that the table does not list (none of an unfinished interval)
    assert {str(p) for p in table.rglob("*.parquet")} == set(files)

    commits = delta_app_transactions(table)
    assert commits and max(commits.values()) == 1  # one commit per checkpoint and subtask
    assert {app_id.rsplit("/", 1)[1] for app_id, _ in commits} == {"0", "1"}
