"""Bad input and bad configuration give a clear error naming the problem."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import CheckpointStorageError, SourceError

pytestmark = pytest.mark.spark


def copy_job(env, source_folder, out):
    env.from_source(
        FileSource.for_lines(str(source_folder)), WatermarkStrategy.no_watermarks(), "lines"
    ).sink_to(FileSink.for_rows(str(out)))


def test_a_missing_source_folder_is_named_in_the_error(spark, tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / "chk"))
    copy_job(env, tmp_path / "no-such-folder", tmp_path / "out")
    with pytest.raises(SourceError, match="no-such-folder"):
        env.execute("missing-source")


def test_an_unwritable_checkpoint_folder_is_named_in_the_error(spark, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\n")
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(500)
    env.get_checkpoint_config().set_checkpoint_storage(str(blocker / "checkpoints"))
    copy_job(env, tmp_path / "in", tmp_path / "out")
    with pytest.raises(CheckpointStorageError, match="not writable"):
        env.execute("unwritable-checkpoints")


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "barrierflow.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        timeout=120,
    )


def test_a_malformed_job_file_is_reported_with_its_line(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("from barrierflow import StreamExecutionEnvironment\nenv = (\n")
    result = run_cli("run", str(job), cwd=tmp_path)
    assert result.returncode == 2
    assert "not a valid Python job file" in result.stderr
    assert "line" in result.stderr


def test_a_missing_job_file_is_reported(tmp_path):
    result = run_cli("run", str(tmp_path / "nope.py"), cwd=tmp_path)
    assert result.returncode == 2
    assert "does not exist" in result.stderr
