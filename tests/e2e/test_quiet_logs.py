"""`barrierflow run` as a user sees it: where to look, progress, a summary, one line per
failure and no Java; Spark's log and the tasks' logs are files in the job's log folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

JOB = textwrap.dedent(
    """
    import logging
    import os
    import signal
    import sys

    from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
    from barrierflow.connectors.datagen import DataGeneratorSource
    from barrierflow.connectors.files import FileSink

    MARKERS = sys.argv[1]
    said = []

    def once(name):
        try:
            os.close(os.open(os.path.join(MARKERS, name), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return False
        return True

    def work(value):
        if not said:
            said.append(True)
            logging.getLogger("quiet.job").warning("hello from the task (pid %d)", os.getpid())
        if value >= 600 and once("raise"):
            raise ValueError("the injected failure")
        if value >= 1400 and once("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        return value

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(300)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(5, 100))
    source = DataGeneratorSource(lambda i: i, 2400, records_per_second=600)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(work)
        .uid("work")
        .sink_to(FileSink.for_rows(sys.argv[2]))
        .uid("sink")
    )
    env.execute("quiet-job")
    """
)

JAVA = ("\tat org.apache", "Exception in thread", "py4j", "java.lang.", "Traceback")


def test_a_run_shows_where_to_look_its_progress_and_one_line_per_failure_no_java(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    (tmp_path / "markers").mkdir()
    logs = tmp_path / "logs"
    barrierflow = Path(sys.executable).parent / "barrierflow"
    result = subprocess.run(
        [str(barrierflow), "run", str(job), str(tmp_path / "markers"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "BARRIERFLOW_LOG_DIR": str(logs),
            "BARRIERFLOW_PROGRESS_INTERVAL": "1",
        },
        timeout=240,
    )
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-3000:]

    # Where to look, at the default level, before anything else.
    first = result.stdout.splitlines()[:3]
    assert re.fullmatch(
        r"job 'quiet-job' \(\w+\): REST endpoint at http://127\.0\.0\.1:\d+/jobs/\w+", first[0]
    ), console[-3000:]
    assert re.fullmatch(r"dashboard: http://127\.0\.0\.1:\d+/#token=[\w-]+", first[1]), first
    folder = Path(first[2].removeprefix("logs: "))
    assert folder.parent == logs and folder.name.startswith("quiet-job-"), first

    # Progress lines (not a terminal), then the summary.
    assert re.search(r"^\[\d+ s\] RUNNING: in [\d,]+/s, out ", result.stdout, re.M), console
    assert re.search(r"^job 'quiet-job' FINISHED after ", result.stdout, re.M), console
    assert re.search(
        r"^checkpoints: \d+ completed, \d+ failed .*; 2 restarts$", result.stdout, re.M
    )
    assert f"logs: {folder}" in result.stdout.splitlines()[-1]

    # One readable line per failure, naming the cause; no Java, no Python traceback.
    failures = [line for line in result.stderr.splitlines() if " failed: " in line]
    assert len(failures) == 2, console[-3000:]
    assert any("ValueError: the injected failure" in line for line in failures), failures
    assert any("killed by SIGKILL" in line for line in failures), failures
    for page in JAVA:
        assert page not in console, console[-3000:]

    # The files: Spark's log, the JobMaster's, and the tasks' own lines.
    assert (folder / "spark.log").is_file()
    assert "attempt 0 failed" in (folder / "jobmaster.log").read_text()
    task_logs = sorted(folder.glob("task-*.log"))
    assert task_logs, sorted(p.name for p in folder.iterdir())
    said = "".join(p.read_text() for p in task_logs)
    assert "WARNING [attempt 0] quiet.job: hello from the task" in said, said
