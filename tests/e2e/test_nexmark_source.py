"""Nexmark sources on Spark: a generator job (a task killed mid-run) and a job reading one
events file at parallelism 2 commit exactly the generated events."""

from __future__ import annotations

import json

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment
from barrierflow.connectors.files import FileSink
from barrierflow.nexmark.events_file import write_events
from barrierflow.nexmark.generator import GeneratorConfig, generate_events
from barrierflow.nexmark.job import events_from_file, events_from_generator
from barrierflow.nexmark.model import to_table_row

pytestmark = pytest.mark.spark

CONFIG = GeneratorConfig(seed=5)
COUNT = 12_000


def environment(tmp_path) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    return env


def committed(sink: FileSink) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True) for row in sink.committed_output())


def expected() -> list[str]:
    rows = map(to_table_row, generate_events(CONFIG, COUNT))
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def test_a_paced_generator_job_with_a_killed_task_commits_every_event_once(spark, tmp_path):
    env = environment(tmp_path)
    sink = FileSink.for_rows(str(tmp_path / "out"))
    events = events_from_generator(env, CONFIG, COUNT, events_per_second=4_000)
    events.map(to_table_row).uid("rows").sink_to(sink).uid("sink")
    job = env.execute_async("nexmark-generator")
    assert job.wait_for_completed_checkpoints(2, timeout=60)
    job.inject_failure("kill", 0, 1)
    result = job.wait(timeout=120)
    assert result.restarts >= 1
    assert committed(sink) == expected()


@pytest.mark.parametrize("name", ["events.jsonl", "events.parquet"])
def test_a_job_reading_one_events_file_in_parallel_commits_every_event_once(spark, tmp_path, name):
    path = tmp_path / name
    write_events(path, CONFIG, COUNT, chunk_events=1_000)
    env = environment(tmp_path)
    sink = FileSink.for_rows(str(tmp_path / "out"))
    events_from_file(env, path).map(to_table_row).uid("rows").sink_to(sink).uid("sink")
    env.execute_async(f"nexmark-file-{name}").wait(timeout=120)
    assert committed(sink) == expected()
