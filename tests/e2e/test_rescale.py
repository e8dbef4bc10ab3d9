"""A running job rescaled twice (issue 11, "Rescaling", the first test): run at parallelism 2,
stopped with a savepoint (no drain), resumed from it at 3, stopped with a savepoint again,
resumed at 1 and run to the end. The committed output equals a run that never stopped. Each
resumed run has a checkpoint folder of its own, so only the savepoint carries the state, and
the first savepoint is moved (its folder renamed) before it restores: savepoints are
relocatable. A retained checkpoint restores at another parallelism too (the rerun of a
cancelled job).

Two jobs, as in the issue's test, over one paced generator source (its split positions
move between subtasks): a keyed running word count (keyed state) and an event-time
tumbling-window count (window contents and their timers). Each generator split's
timestamps rise, and the source's watermark is the minimum over its splits, so no record
is late in any run: the expected output is computed from the input alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow.checkpoint.storage import load_metadata
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.errors import JobExecutionError
from barrierflow.window import TumblingEventTimeWindows

from .conftest import read_rows
from .jobs import DEPLOY_S, running_count_rows, word_of

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host

RECORDS = 18_000
WINDOW_MS = 1_000
STEP_MS = 10
"""Record i has event time i * STEP_MS."""


def word_and_index(index: int) -> tuple[str, int]:
    return word_of(index), index


def rescaled_job(
    tmp_path, pipeline: str, parallelism: int, rate: float | None, checkpoints: str = "checkpoints"
) -> StreamExecutionEnvironment:
    """The "counts" or the "windows" job (two vertices: 6 of the session's 8 slots at 3),
    checkpointing into `tmp_path / checkpoints`."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.enable_checkpointing(300)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / checkpoints))
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        lambda record, _: record[1] * STEP_MS
    )
    source = DataGeneratorSource(word_and_index, RECORDS, records_per_second=rate)
    records = env.from_source(source, strategy, "words").uid("words")
    if pipeline == "counts":
        counted = (
            records.map(lambda record: (record[0], 1))
            .uid("pair")
            .key_by(lambda pair: pair[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .uid("count")
        )
    else:
        counted = (
            records.map(lambda r: (r[0], r[1] * STEP_MS // WINDOW_MS * WINDOW_MS, 1))
            .uid("tag-window")
            .key_by(lambda row: row[0])
            .window(TumblingEventTimeWindows.of(WINDOW_MS))
            .reduce(lambda a, b: (a[0], a[1], a[2] + b[2]))
            .uid("window-count")
        )
    counted.sink_to(FileSink.for_rows(str(tmp_path / "out"))).uid("sink")
    return env


def expected_rows(pipeline: str) -> Counter:
    """What a run that never stopped commits, from the input alone."""
    words = [word_of(i) for i in range(RECORDS)]
    if pipeline == "counts":
        return running_count_rows(words)
    windows = Counter((word, i * STEP_MS // WINDOW_MS * WINDOW_MS) for i, word in enumerate(words))
    return Counter((word, start, count) for (word, start), count in windows.items())


def stop_after_a_checkpoint(env: StreamExecutionEnvironment, savepoints: Path):
    """Run until a checkpoint completed, then stop with a savepoint (no drain): the client
    and the savepoint's folder."""
    job = env.execute_async("rescale")
    assert job.wait_for_completed_checkpoints(1, timeout=DEPLOY_S)
    stopped = job.stop_with_savepoint(False, str(savepoints), timeout=120).result()
    job.wait(timeout=60)
    assert job.get_job_status() == "FINISHED"
    return job, Path(_fs.Location(stopped).path)


def savepoint_id(folder: Path) -> int:
    return load_metadata(_fs.location(folder))["checkpoint_id"]


def committed(tmp_path) -> int:
    return sum(read_rows(tmp_path / "out").values())


@pytest.mark.parametrize("pipeline", ["counts", "windows"])
def test_a_job_stopped_at_2_resumed_at_3_then_at_1_commits_what_a_run_that_never_stopped_does(
    spark, tmp_path, pipeline
):
    expected = expected_rows(pipeline)
    _, first = stop_after_a_checkpoint(
        rescaled_job(tmp_path, pipeline, 2, rate=4000, checkpoints="run-1"), tmp_path / "sp"
    )
    at_2 = committed(tmp_path)
    assert 0 < at_2 < len(expected)

    # Moved: the savepoint restores from wherever its folder is now.
    moved = tmp_path / "moved" / "renamed-savepoint"
    moved.parent.mkdir()
    first.rename(moved)
    env = rescaled_job(tmp_path, pipeline, 3, rate=4000, checkpoints="run-2")
    env.set_savepoint_restore_settings(str(moved))
    at_3, second = stop_after_a_checkpoint(env, tmp_path / "sp")
    assert at_3.restored_from == savepoint_id(moved)
    assert at_2 < committed(tmp_path) < len(expected)

    env = rescaled_job(tmp_path, pipeline, 1, rate=None, checkpoints="run-3")
    env.set_savepoint_restore_settings(str(second))
    last = env.execute_async("rescale")
    last.wait(timeout=DEPLOY_S)
    assert last.restored_from == savepoint_id(second)
    assert read_rows(tmp_path / "out") == expected


def test_a_retained_checkpoint_of_a_cancelled_run_restores_at_another_parallelism(spark, tmp_path):
    job = rescaled_job(tmp_path, "counts", 2, rate=4000).execute_async("rescale")
    assert job.wait_for_completed_checkpoints(2, timeout=DEPLOY_S)
    job.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        job.wait(timeout=120)
    assert 0 < committed(tmp_path) < len(expected_rows("counts"))

    rerun = rescaled_job(tmp_path, "counts", 3, rate=None).execute_async("rescale")
    rerun.wait(timeout=DEPLOY_S)
    assert rerun.restored_from is not None
    assert read_rows(tmp_path / "out") == expected_rows("counts")
