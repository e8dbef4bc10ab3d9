"""A job watching a folder (`FileSource.monitor_continuously`): files added while it runs are
read, a killed source task resumes from its checkpoint, and the committed output is exactly
once (issue 13)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import JobExecutionError

from .conftest import read_rows
from .jobs import running_count_rows, word_of

pytestmark = pytest.mark.spark

FILES_PER_BATCH = 4
LINES_PER_FILE = 400


def add_files(folder: Path, batch: int) -> list[str]:
    """Write one batch of files as a producer should: under a hidden name, then renamed in.
    Returns the words they hold."""
    words = []
    for f in range(FILES_PER_BATCH):
        start = (batch * FILES_PER_BATCH + f) * LINES_PER_FILE
        lines = [word_of(i) for i in range(start, start + LINES_PER_FILE)]
        staged = folder / f".batch-{batch}-{f}.txt"
        staged.write_text("\n".join(lines) + "\n")
        staged.rename(folder / f"batch-{batch}-{f}.txt")
        words += lines
    return words


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Check `condition` until it holds, for at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.05)


def test_a_monitored_folder_is_read_exactly_once_across_a_killed_task(spark, tmp_path):
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    words = add_files(folder, 0)

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(200)
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    (
        env.from_source(
            FileSource.for_lines(str(folder)).monitor_continuously(100),
            WatermarkStrategy.no_watermarks(),
            "folder",
        )
        .uid("folder")
        .map(lambda w: (w, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(out)))
        .uid("sink")
    )
    job = env.execute_async("monitored-folder")

    def committed() -> Counter:
        return read_rows(out) if out.exists() else Counter()

    def all_committed() -> bool:
        return sum(committed().values()) >= len(words)

    wait_until(all_committed, 60, "the files present at start are read and committed")
    words += add_files(folder, 1)
    wait_until(lambda: sum(committed().values()) > len(words) - 2 * LINES_PER_FILE, 60, "batch 1")
    source = next(v.vertex_id for v in job.job_graph.vertices if v.is_source)
    attempt = job.inject_failure("kill", source, 0)
    words += add_files(folder, 2)  # appears while the killed task recovers
    assert job.wait_until_running(attempt + 1, timeout=60)
    words += add_files(folder, 3)
    wait_until(all_committed, 60, "every file is read and its counts committed")

    job.cancel()
    with pytest.raises(JobExecutionError, match="cancelled"):
        job.wait(timeout=60)
    assert committed() == running_count_rows(words)
    assert job.attempt >= 1
