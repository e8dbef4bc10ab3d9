"""`barrierflow run job.py` runs a job file with the command line's settings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import read_rows

pytestmark = pytest.mark.spark

JOB = textwrap.dedent(
    """
    import sys
    from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
    from barrierflow.connectors.files import FileSink, FileSource

    env = StreamExecutionEnvironment.get_execution_environment()
    # No env.set_parallelism: the command line's --parallelism is the default. (A job file's
    # own set_parallelism wins over it, as in Flink: tests/api/test_parallelism.py.)
    env.enable_checkpointing(500)
    (
        env.from_source(FileSource.for_lines(sys.argv[1]), WatermarkStrategy.no_watermarks(), "in")
        .map(lambda line: (line, len(line)))
        .sink_to(FileSink.for_rows(sys.argv[2]))
    )
    result = env.execute("cli-job")
    print("parallelism", env.get_parallelism(), "checkpoints", len(result.checkpoints))
    """
)


def test_run_executes_the_job_file_with_the_given_parallelism_and_checkpoint_dir(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "words.txt").write_text("alpha\nbeta\ngamma\n")
    job = tmp_path / "job.py"
    job.write_text(JOB)
    barrierflow = Path(sys.executable).parent / "barrierflow"
    result = subprocess.run(
        [
            str(barrierflow),
            "run",
            str(job),
            "--parallelism",
            "1",
            "--checkpoint-dir",
            str(tmp_path / "chk"),
            str(tmp_path / "in"),
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "parallelism 1 checkpoints" in result.stdout
    assert read_rows(tmp_path / "out") == {("alpha", 5): 1, ("beta", 4): 1, ("gamma", 5): 1}
    assert any((tmp_path / "chk" / "cli-job").glob("chk-*/_metadata"))
