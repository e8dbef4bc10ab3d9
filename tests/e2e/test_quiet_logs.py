"""`barrierflow run` as a user sees it: where to look, progress, a summary, one line per
failure and no Java; Spark's log and the tasks' logs are files in the job's log folder.

The job's source never ends: the test reads the console as it comes, waits (bounded) until
a progress line shows the running job's rates after both failures, then stops the job with
a savepoint over REST, so what it checks never depends on when the ticks fall."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
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
    source = DataGeneratorSource(lambda i: i, None, records_per_second=600)
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
    run = subprocess.Popen(
        [str(barrierflow), "run", str(job), str(tmp_path / "markers"), str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "BARRIERFLOW_LOG_DIR": str(logs),
            "BARRIERFLOW_PROGRESS_INTERVAL": "1",
        },
    )
    try:
        stdout, stderr = _stop_once_rates_show_after_two_restarts(run, tmp_path / "savepoints")
    finally:
        run.kill()
    result = subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)
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

    # Progress lines (not a terminal): the running attempts' rates (waited for above), then
    # the summary.
    assert re.search(RATES_WHILE_RUNNING, result.stdout, re.M), console
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


RATES_WHILE_RUNNING = r"^\[\d+ s\] RUNNING: in ([\d,]+)/s, out ([\d,]+)/s, .*, 2 restarts$"
"""A progress line of the last attempt (after both failures) showing its rates."""


def _stop_once_rates_show_after_two_restarts(
    run: subprocess.Popen, savepoints: Path, timeout_s: float = 240.0
) -> tuple[str, str]:
    """Read the run's console until a progress line of the running job after both failures
    shows rates above zero in and out, then stop the job with a savepoint over REST (with
    the token the dashboard line names) and collect the rest. Fails, naming what was seen,
    if no such line comes within `timeout_s`."""
    lines: queue.Queue[str | None] = queue.Queue()
    errors: list[str] = []

    def pump() -> None:
        assert run.stdout is not None
        for line in run.stdout:
            lines.put(line)
        lines.put(None)

    def pump_errors() -> None:
        assert run.stderr is not None
        errors.extend(run.stderr)

    readers = [threading.Thread(target=f, daemon=True) for f in (pump, pump_errors)]
    for reader in readers:
        reader.start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(
                f"no RUNNING progress line with rates after 2 restarts within {timeout_s:.0f} s; "
                f"the console so far:\n{''.join(seen)[-3000:]}{''.join(errors)[-2000:]}"
            ) from None
        if line is None:
            raise AssertionError(
                "the run ended before a RUNNING progress line with rates after 2 restarts:\n"
                + "".join(seen)[-3000:]
                + "".join(errors)[-2000:]
            )
        seen.append(line)
        rates = re.match(RATES_WHILE_RUNNING, line.rstrip("\n"))
        if rates and all(int(r.replace(",", "")) > 0 for r in rates.groups()):
            break
    endpoint = re.search(r"REST endpoint at (http://\S+)/jobs/(\w+)$", seen[0].rstrip("\n"))
    token = re.search(r"#token=([\w-]+)$", seen[1].rstrip("\n"))
    assert endpoint and token, seen[:3]
    url, job_id = endpoint.groups()
    request = urllib.request.Request(
        f"{url}/jobs/{job_id}/stop",
        data=json.dumps({"targetDirectory": str(savepoints), "drain": False}).encode(),
        headers={"Authorization": f"Bearer {token.group(1)}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 202
        trigger = json.loads(answer.read())["request-id"]
    # Read the stop's result (its endpoint serves on until then), then the run ends.
    status = urllib.request.Request(
        f"{url}/jobs/{job_id}/savepoints/{trigger}",
        headers={"Authorization": f"Bearer {token.group(1)}"},
    )
    while time.monotonic() < deadline:
        with urllib.request.urlopen(status, timeout=30) as answer:
            if json.loads(answer.read())["status"]["id"] != "IN_PROGRESS":
                break
        time.sleep(0.2)  # polling the stop's state, bounded by the deadline
    run.wait(timeout=120)
    for reader in readers:
        reader.join(timeout=30)
    while (line := lines.get()) is not None:
        seen.append(line)
    return "".join(seen), "".join(errors)
