"""Failures injected into running jobs: the committed output must equal a failure-free run.

A killed stream-task process is respawned by its Spark task, in place (the job keeps its
one Spark job); a killed Spark task (its Python worker) costs a new Spark job."""

from __future__ import annotations

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.errors import JobExecutionError

from .conftest import read_rows
from .jobs import running_count_rows, word_of
from .test_rollback_in_place import spark_jobs_of

pytestmark = pytest.mark.spark


def running_count_job(tmp_path, records: int, rate: float | None, restart=None):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(restart or RestartStrategies.fixed_delay_restart(3, 200))
    source = DataGeneratorSource(word_of, records, records_per_second=rate)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    return env


def counting_vertex(job) -> int:
    return next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)


def test_killing_a_counting_stream_task_respawns_it_in_place_exactly_once(spark, tmp_path):
    records = 30_000
    job = running_count_job(tmp_path, records, rate=6000).execute_async("kill-counter")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    counting = counting_vertex(job)
    spark_task = job.spark_task_process(counting, 1)
    killed = job.kill_task_process(counting, 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    assert spark_jobs_of(spark, job.get_job_id(), result.restarts) == 1  # the slots were kept
    assert job.spark_task_process(counting, 1) == spark_task
    assert job.task_process(counting, 1)[1] not in (killed, spark_task[1])
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))


def test_killing_a_source_spark_task_recovers_in_a_new_stage_exactly(spark, tmp_path):
    records = 24_000
    job = running_count_job(tmp_path, records, rate=6000).execute_async("kill-source")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    stream_task = job.task_process(0, 0)
    job.kill_spark_task(0, 0)  # the Python worker itself: its stream task goes with it
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    assert spark_jobs_of(spark, job.get_job_id(), result.restarts) >= 2
    assert job.task_process(0, 0) != stream_task
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))


def test_a_rerun_resumes_from_the_last_checkpoint_of_a_cancelled_run(spark, tmp_path):
    records = 24_000
    first = running_count_job(tmp_path, records, rate=5000).execute_async("resume")
    assert first.wait_for_completed_checkpoints(3, timeout=120)
    first.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        first.wait(timeout=120)
    committed_before = sum(read_rows(tmp_path / "out").values())
    assert 0 < committed_before < records

    second = running_count_job(tmp_path, records, rate=None).execute_async("resume")
    second.wait(timeout=240)
    assert second.restored_from is not None
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))


class FailOn:
    """A map that raises for one record in every attempt: the job can never get past it."""

    def __init__(self, poison: int) -> None:
        self.poison = poison

    def __call__(self, value: int) -> int:
        if value == self.poison:
            raise ValueError(f"poison record {value}")
        return value


def failing_job(tmp_path, restart):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(restart)
    (
        env.from_collection(list(range(100)))
        .map(FailOn(42))
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
    )
    return env


def test_fixed_delay_restarts_then_gives_up_with_the_cause(spark, tmp_path):
    env = failing_job(tmp_path, RestartStrategies.fixed_delay_restart(2, 100))
    with pytest.raises(JobExecutionError) as failure:
        env.execute("poison-fixed-delay")
    message = str(failure.value)
    assert "gave up after 2 restart(s)" in message
    assert "poison record 42" in message


def test_no_restart_fails_the_job_at_the_first_failure(spark, tmp_path):
    env = failing_job(tmp_path, RestartStrategies.no_restart())
    client = env.execute_async("poison-no-restart")
    with pytest.raises(JobExecutionError, match="no_restart") as failure:
        client.wait(timeout=120)
    assert "poison record 42" in str(failure.value)
    assert client.attempt == 0
