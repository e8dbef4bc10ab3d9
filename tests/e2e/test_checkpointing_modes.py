"""Every checkpointing mode on Spark: aligned and unaligned under backpressure, recovery from
an unaligned checkpoint, at-least-once recovery, and checkpoints while some sources have
finished (issue 4)."""

from __future__ import annotations

import statistics
import time

import pytest

from barrierflow import (
    CheckpointingMode,
    RestartStrategies,
    StreamExecutionEnvironment,
    WatermarkStrategy,
)
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import ConfigurationError

from .conftest import read_rows
from .jobs import running_count_rows, word_of

pytestmark = pytest.mark.spark


class SlowIdentity:
    """A map that takes `seconds` per record: the sink after it backpressures the job."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, value):
        time.sleep(self.seconds)
        return value


class SlowSum:
    """A reduce for (word, n) pairs that takes `seconds` per record."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, a, b):
        time.sleep(self.seconds)
        return (a[0], a[1] + b[1])


def durations_ms(result) -> list[int]:
    return [c.completion_ms - c.trigger_ms for c in result.checkpoints]


def backpressured_job(
    tmp_path, name: str, *, unaligned: bool, records: int, aligned_timeout_ms: int = 0
):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(str(tmp_path / name / "checkpoints"))
    config.enable_unaligned_checkpoints(unaligned)
    config.set_aligned_checkpoint_timeout(aligned_timeout_ms)
    (
        env.from_source(
            DataGeneratorSource(lambda i: i, records, num_splits=2),
            WatermarkStrategy.no_watermarks(),
            "fast numbers",
        )
        .rebalance()
        .map(SlowIdentity(0.0002))
        .uid("slow")
        .sink_to(FileSink.for_rows(str(tmp_path / name / "out")))
        .uid("sink")
    )
    return env.execute(name)


def test_under_backpressure_unaligned_checkpoints_complete_far_faster_than_aligned(spark, tmp_path):
    # The channels hold ~44 000 records (4 channels x (8 credits + 3 queued) x 1 000): twice
    # that keeps the sources backpressured for several checkpoint intervals.
    records = 100_000
    aligned = backpressured_job(tmp_path, "aligned", unaligned=False, records=records)
    unaligned = backpressured_job(tmp_path, "unaligned", unaligned=True, records=records)

    aligned_ms, unaligned_ms = durations_ms(aligned), durations_ms(unaligned)
    print(f"aligned {aligned_ms} ms, unaligned {unaligned_ms} ms")
    assert statistics.median(unaligned_ms) < 1_500
    assert statistics.median(aligned_ms) > 3 * statistics.median(unaligned_ms)
    assert len(unaligned_ms) > len(aligned_ms)
    assert any(
        ack.unaligned and ack.persisted_bytes > 0
        for checkpoint in unaligned.checkpoints
        for ack in checkpoint.acknowledged
    )
    assert read_rows(tmp_path / "unaligned" / "out") == {i: 1 for i in range(records)}
    assert read_rows(tmp_path / "aligned" / "out") == {i: 1 for i in range(records)}
    assert aligned.restarts == 0 and unaligned.restarts == 0


def test_under_backpressure_aligned_checkpoints_with_a_timeout_switch_to_unaligned(spark, tmp_path):
    records = 60_000
    result = backpressured_job(
        tmp_path, "timeout", unaligned=True, records=records, aligned_timeout_ms=200
    )

    periodic = [c for c in result.checkpoints if not c.is_final]
    assert periodic, "no periodic checkpoint completed"
    # Every periodic checkpoint timed out aligning (the backlog takes seconds to drain) and
    # switched: the two slow subtasks persisted in-flight data.
    for checkpoint in periodic:
        slow = [ack for ack in checkpoint.acknowledged if ack.vertex_id == 1]
        assert all(ack.unaligned for ack in slow), checkpoint.checkpoint_id
    assert any(ack.persisted_bytes > 0 for c in periodic for ack in c.acknowledged)
    assert not any(ack.unaligned for ack in result.checkpoints[-1].acknowledged)  # final
    assert result.restarts == 0
    assert read_rows(tmp_path / "timeout" / "out") == {i: 1 for i in range(records)}


def running_count_job(
    tmp_path, records: int, rate: float, *, mode=None, unaligned=False, seconds=0.0
):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300, mode)
    config = env.get_checkpoint_config()
    config.set_checkpoint_storage(str(tmp_path / "checkpoints"))
    config.enable_unaligned_checkpoints(unaligned)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    (
        env.from_source(
            DataGeneratorSource(word_of, records, records_per_second=rate),
            WatermarkStrategy.no_watermarks(),
            "words",
        )
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(SlowSum(seconds))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    return env


def counting_vertex(job) -> int:
    return next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)


def test_a_job_recovered_from_an_unaligned_checkpoint_with_in_flight_data_is_exactly_once(
    spark, tmp_path
):
    # The source outpaces the slow counters (~2 x 4 000 records/s): data piles up in flight.
    records = 60_000
    env = running_count_job(tmp_path, records, 12_000, unaligned=True, seconds=0.0002)
    job = env.execute_async("unaligned-recovery")
    assert job.wait_for_completed_checkpoints(3, timeout=120)
    job.kill_task_process(counting_vertex(job), 1)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    restored = next(c for c in result.checkpoints if c.checkpoint_id == job.restored_from)
    assert sum(ack.persisted_bytes for ack in restored.acknowledged) > 0
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(records))


def test_at_least_once_recovers_a_killed_task_without_losing_a_record(spark, tmp_path):
    records = 30_000
    env = running_count_job(tmp_path, records, 6_000, mode=CheckpointingMode.AT_LEAST_ONCE)
    assert env.get_checkpoint_config().get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    job = env.execute_async("at-least-once-recovery")
    assert job.wait_for_completed_checkpoints(2, timeout=120)
    job.kill_task_process(counting_vertex(job), 0)
    result = job.wait(timeout=240)

    assert result.restarts >= 1
    expected = running_count_rows(word_of(i) for i in range(records))
    missing = set(expected) - set(read_rows(tmp_path / "out"))
    assert not missing, f"{len(missing)} rows lost, e.g. {sorted(missing)[:5]}"


def test_at_least_once_with_unaligned_checkpoints_is_refused_before_the_job_starts(tmp_path):
    env = running_count_job(
        tmp_path, 10, None, mode=CheckpointingMode.AT_LEAST_ONCE, unaligned=True
    )
    with pytest.raises(ConfigurationError, match="unaligned checkpoints need"):
        env.execute_async("refused")


def test_checkpoints_go_on_after_a_source_finished_and_the_final_one_commits_everything(
    spark, tmp_path
):
    # One tiny split and one large: source subtask 0 ends at once, subtask 1 reads for seconds.
    folder = tmp_path / "in"
    folder.mkdir()
    tiny = [word_of(i) for i in range(10)]
    large = [word_of(i) for i in range(10, 15_010)]
    (folder / "a-tiny.txt").write_text("\n".join(tiny) + "\n")
    (folder / "b-large.txt").write_text("\n".join(large) + "\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    (
        env.from_source(FileSource.for_lines(str(folder)), WatermarkStrategy.no_watermarks(), "in")
        .map(SlowIdentity(0.0003))
        .map(lambda w: (w, 1))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(tmp_path / "out")))
        .uid("sink")
    )
    result = env.execute("finished-sources")

    periodic = [c for c in result.checkpoints if not c.is_final]
    assert len(periodic) >= 3
    assert result.checkpoints[-1].is_final
    subtasks = sum(v.parallelism for v in result.checkpoints[-1].vertices)
    assert all(len(c.acknowledged) == subtasks for c in result.checkpoints)
    assert result.restarts == 0
    assert read_rows(tmp_path / "out") == running_count_rows(tiny + large)
