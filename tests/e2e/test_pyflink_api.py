"""PyFlink's DataStream API on Spark (issue 24): the behaviours that need a running job.
A BATCH job whose keyed sum emits only final values, read back through execute_and_collect
(items 9, 10, 11); an unbounded job read through the collect iterator in a `with` block,
closed early (item 9); JobClient's futures: a savepoint, a stop with savepoint, the
execution result (item 19)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from barrierflow import JobExecutionResult, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.discarding import DiscardingSink
from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode

pytestmark = pytest.mark.spark

WORDS = ["fox", "dog", "cat", "fox", "fox", "cat"] * 50


def test_a_batch_keyed_sum_collects_only_each_words_final_count(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    counts = env.from_collection(WORDS).map(lambda w: (w, 1)).key_by(lambda r: r[0]).sum(1)
    with counts.execute_and_collect("batch-word-count") as records:
        collected = sorted(records)
        assert records.job_client.get_job_status() == "FINISHED"
    assert collected == [("cat", 100), ("dog", 50), ("fox", 150)]
    assert not Path(records.folder).exists()


def ticks(env):
    source = DataGeneratorSource(lambda i: i, None, records_per_second=200, num_splits=1)
    return env.from_source(source, WatermarkStrategy.no_watermarks(), "ticks")


def test_closing_the_collect_iterator_early_cancels_the_unbounded_job(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    with ticks(env).map(lambda i: i * 10).execute_and_collect("collect-early") as records:
        first = list(itertools.islice(records, 25))
    assert first == [i * 10 for i in range(25)]  # one split: in order, each once
    assert records.job_client.join(60) and records.job_client.get_job_status() == "CANCELED"
    assert not Path(records.folder).exists()


def test_job_client_futures_take_savepoints_and_end_the_job(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    ticks(env).sink_to(DiscardingSink())
    client = env.execute_async("futures")
    assert client.wait_for_completed_checkpoints(1, timeout=120)
    taken = client.trigger_savepoint(str(tmp_path / "savepoints")).result(timeout=120)
    assert client.get_job_status() == "RUNNING"
    stopping = client.stop_with_savepoint(True, str(tmp_path / "savepoints"))
    stopped = stopping.result(timeout=120)
    assert client.get_job_status() == "FINISHED"
    assert {Path(p).name for p in (taken, stopped)} == {
        p.name for p in (tmp_path / "savepoints").iterdir()
    }
    result = client.get_job_execution_result().result(timeout=60)
    assert isinstance(result, JobExecutionResult)
    assert result.get_job_id() == client.get_job_id()
