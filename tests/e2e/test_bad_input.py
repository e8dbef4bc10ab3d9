"""Bad input and bad configuration give a clear error naming the problem."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.base import DEAD_LETTERS
from barrierflow.connectors.files import FileSink, FileSource
from barrierflow.errors import BarrierflowError, CheckpointStorageError, SourceError

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


def test_json_lines_that_do_not_decode_fail_the_job_or_go_to_dead_letters(spark, tmp_path):
    (tmp_path / "in").mkdir()
    good = [{"n": n} for n in range(300)]
    lines = [json.dumps(row) for row in good]
    lines[100:100] = ['{"n": oops']
    lines[201:201] = ["\udcff"]  # not UTF-8 once written with surrogateescape
    text = "\n".join(lines) + "\n"
    (tmp_path / "in" / "e.jsonl").write_bytes(text.encode("utf-8", "surrogateescape"))
    offsets = [len("\n".join(lines[:i]).encode("utf-8", "surrogateescape")) + 1 for i in (100, 201)]

    def job(dead_letters: bool):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(1)
        env.enable_checkpointing(200)
        env.get_checkpoint_config().set_checkpoint_storage(str(tmp_path / f"chk-{dead_letters}"))
        env.set_restart_strategy(RestartStrategies.no_restart())
        source = FileSource.for_json_lines(str(tmp_path / "in"))
        if dead_letters:
            source = source.with_dead_letters()
        events = env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
        out = FileSink.for_rows(str(tmp_path / f"out-{dead_letters}"))
        events.sink_to(out)
        letters = FileSink.for_rows(str(tmp_path / f"dead-{dead_letters}"))
        events.get_side_output(DEAD_LETTERS).map(lambda letter: letter.as_dict()).sink_to(letters)
        return env, out, letters

    env, _, _ = job(dead_letters=False)
    with pytest.raises(BarrierflowError) as failure:
        env.execute("bad-lines-fail")
    assert (
        f"source 'events': cannot decode the record at byte offset {offsets[0]} of split "
        f"'e.jsonl': line 101 of "
    ) in str(failure.value)

    env, out, letters = job(dead_letters=True)
    env.execute("bad-lines-dead-letters")
    assert sorted(out.committed_output(), key=lambda row: row["n"]) == good
    dead = sorted(letters.committed_output(), key=lambda row: row["offset"])
    assert [(row["source"], row["split"], row["offset"]) for row in dead] == [
        ("events", "e.jsonl", offsets[0]),
        ("events", "e.jsonl", offsets[1]),
    ]
    assert [row["raw"] for row in dead] == ['{"n": oops', "\\xff"]
    assert "line 101 of " in dead[0]["error"] and "is not valid JSON" in dead[0]["error"]
    assert dead[1]["error"].startswith("line 202 of ") and "not valid UTF-8" in dead[1]["error"]


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
