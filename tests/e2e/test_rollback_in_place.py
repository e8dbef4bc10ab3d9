"""A user function that raises once is recovered in place: the Spark job that started the
job runs the next attempt too (no new Spark job), and the committed output equals a
failure-free run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.core.functions import MapFunction, RuntimeContext

from .conftest import read_rows
from .jobs import running_count_rows, word_of

pytestmark = pytest.mark.spark


class RaiseOnceInAttempt0(MapFunction):
    """Pairs words; subtask 0 raises at its `after`-th record in attempt 0 only, and notes the
    time of the exception and of its first record in attempt 1 (recovery time)."""

    def __init__(self, after: int, marks: str) -> None:
        self.after = after
        self.marks = marks

    def open(self, runtime_context: RuntimeContext) -> None:
        self.attempt = runtime_context.get_attempt_number()
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.seen = 0

    def map(self, word: str) -> tuple[str, int]:
        self.seen += 1
        if self.subtask == 0 and self.seen == 1 and self.attempt == 1:
            Path(self.marks, "resumed").write_text(repr(time.time()))
        if self.subtask == 0 and self.attempt == 0 and self.seen == self.after:
            Path(self.marks, "raised").write_text(repr(time.time()))
            raise ValueError("fails once, in attempt 0")
        return (word, 1)


def spark_jobs_of(spark, job_id: str, attempts: int) -> int:
    tracker = spark.sparkContext.statusTracker()
    return sum(
        len(tracker.getJobIdsForGroup(f"barrierflow-{job_id}-{n}")) for n in range(attempts + 1)
    )


def test_a_user_function_that_raises_once_is_recovered_in_place(spark, tmp_path):
    records = 20_000
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 0))
    source = DataGeneratorSource(word_of, records, records_per_second=8000)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
        .map(RaiseOnceInAttempt0(4000, str(tmp_path)))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    client = env.execute_async("raise-once-in-place")
    result = client.wait(timeout=240)

    assert result.restarts == 1
    assert spark_jobs_of(spark, client.get_job_id(), result.restarts) == 1
    assert client.restored_from is not None
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))
    raised = float((tmp_path / "raised").read_text())
    resumed = float((tmp_path / "resumed").read_text())
    print(f"records flow again {resumed - raised:.3f} s after the exception (in place)")
    assert 0 < resumed - raised < 30
