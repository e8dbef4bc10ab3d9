"""`barrierflow cleanup JOB_FILE`: a killed run's staged files are resolved without running
the job (no Spark), and the command is refused while a run holds the job's folder."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from click.testing import CliRunner

from barrierflow import _fs
from barrierflow.checkpoint.lease import CheckpointLease, this_process
from barrierflow.cli import main
from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.files import FileSink

JOB = textwrap.dedent(
    """
    import sys

    from barrierflow import StreamExecutionEnvironment
    from barrierflow.connectors.files import FileSink

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000)
    env.set_parallelism(2)
    env.from_collection([1, 2, 3]).sink_to(FileSink.for_rows(sys.argv[1])).uid("files")
    env.execute("cli-cleanup")
    print("after execute")
    """
)


def killed_run(out: Path) -> None:
    """Staged files of both subtasks of a run killed before its first checkpoint completed."""
    for subtask in (0, 1):
        context = SinkContext("files", subtask, 2, 0, "killed-0", job_name="cli-cleanup")
        writer = FileSink.for_rows(str(out)).create_writer(context)
        writer.restore([])
        writer.write_batch([subtask])
        writer.pre_commit(1)
        writer.write_batch([subtask + 10])


def staged(out: Path) -> list[str]:
    return [name for _, _, names in os.walk(out / ".staging") for name in names]


def cleanup(tmp_path: Path) -> object:
    job_file = tmp_path / "job.py"
    job_file.write_text(JOB)
    command = ["cleanup", str(job_file), "--checkpoint-dir", str(tmp_path / "chk")]
    return CliRunner().invoke(main, [*command, str(tmp_path / "out")])


def test_cleanup_resolves_a_killed_runs_staged_files_without_running_the_job(tmp_path):
    killed_run(tmp_path / "out")
    assert len(staged(tmp_path / "out")) == 4

    result = cleanup(tmp_path)

    assert result.exit_code == 0, result.output
    assert "cleaned up sink(s) files as a restore of nothing" in result.output
    assert "after execute" not in result.output  # the job file stopped at execute
    assert staged(tmp_path / "out") == []
    assert FileSink.for_rows(str(tmp_path / "out")).committed_output() == []


def test_cleanup_is_refused_while_a_run_holds_the_jobs_folder(tmp_path):
    killed_run(tmp_path / "out")
    running = CheckpointLease(
        _fs.location(str(tmp_path / "chk" / "cli-cleanup")),
        this_process("a-running-job", "run1", "cli-cleanup"),
    )
    running.acquire()
    try:
        result = cleanup(tmp_path)
    finally:
        running.release()

    assert result.exit_code == 1
    [line] = [text for text in result.output.splitlines() if text.startswith("error:")]
    assert "job 'cli-cleanup' is already running" in line and "a-running-job" in line
    assert len(staged(tmp_path / "out")) == 4  # nothing touched
