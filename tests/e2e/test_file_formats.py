"""A job writes Parquet partitioned by a date field, a task process is killed mid-run, and
Spark reads the folder back: exactly the input rows, the partition column included."""

from __future__ import annotations

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, RollingPolicy

from .jobs import GatedGeneratorSource, wait_for_attempt

pytestmark = pytest.mark.spark

RECORDS = 12_000
DATES = ["2024-05-01", "2024-05-02", "2024-05-03"]


def event_of(index: int) -> dict:
    return {"date": DATES[index % 3], "id": index, "word": f"w{index % 7}"}


def test_killed_task_partitioned_parquet_reads_back_in_spark_exactly_once(spark, tmp_path):
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    sink = (
        FileSink.for_rows(str(out))
        .with_format("parquet")
        .partition_by("date")
        .with_rolling_policy(RollingPolicy.by_size(16 * 1024))
    )
    (
        env.from_source(
            GatedGeneratorSource(event_of, RECORDS, 4000, tmp_path / "failed", RECORDS // 2),
            WatermarkStrategy.no_watermarks(),
            "events",
        )
        .uid("events")
        .sink_to(sink)
        .uid("sink")
    )
    job = env.execute_async("parquet-by-date")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    job.inject_failure("kill", 0, 1)
    wait_for_attempt(job, 1, timeout=60)
    (tmp_path / "failed").touch()  # the rest of the input runs at full pace
    result = job.wait(timeout=120)

    assert result.restarts >= 1
    frame = spark.read.parquet(str(out))
    assert sorted(frame.columns) == ["date", "id", "word"]
    rows = sorted((str(r["date"]), r["id"], r["word"]) for r in frame.collect())
    expected = sorted((e["date"], e["id"], e["word"]) for e in map(event_of, range(RECORDS)))
    assert rows == expected
    folders = {p.parent.name for p in out.rglob("*.parquet") if ".staging" not in p.parts}
    assert folders == {f"date={d}" for d in DATES}
    assert sorted(sink.committed_output(), key=lambda e: e["id"]) == list(
        map(event_of, range(RECORDS))
    )
