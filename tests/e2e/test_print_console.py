"""`print()` as a user sees it: a job file run with `python job.py` or `barrierflow run job.py`
shows its printed records on its own console (they travel from the stream tasks to the
driver, cluster/executor/task_console.py), with PyFlink's prefixes, in order per subtask."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from barrierflow.cli.commands import main

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host

JOB = textwrap.dedent(
    """
    from barrierflow import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    tens = env.from_collection(list(range(8))).rebalance().map(lambda x: x * 10)
    tens.print()
    tens.print("tens")
    env.execute("print-job")
    """
)
NO_SESSION = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession

    print("active session:", SparkSession.getActiveSession(), file=sys.stderr)
    """
)
PRINTED = re.compile(r"^(tens:)?([12])> (\d+)$")


def printed_by_subtask(lines: list[str]) -> dict[tuple[str, str], list[int]]:
    """The printed values by (identifier, subtask prefix), in the order they were printed."""
    seen: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in lines:
        match = PRINTED.match(line)
        assert match, f"not a printed record: {line!r}"
        seen[(match[1] or "", match[2])].append(int(match[3]))
    return seen


def check_printed(seen: dict[tuple[str, str], list[int]]) -> None:
    for identifier in ("", "tens:"):
        values = [v for (ident, _), vs in seen.items() if ident == identifier for v in vs]
        assert sorted(values) == [0, 10, 20, 30, 40, 50, 60, 70], (identifier, seen)
    for key, values in seen.items():  # one subtask's records come in the order it got them
        assert values == sorted(values), (key, values)
    # both subtasks printed (rebalance deals records round-robin), under both sinks
    assert {subtask for _, subtask in seen} == {"1", "2"}, seen


def test_python_job_py_prints_exactly_its_records_on_the_console(tmp_path):
    """As a user runs it: its own process and Spark driver, its console's standard output.
    The job starts a SparkContext only: no SparkSession (Spark SQL's start-up, seconds)."""
    job = tmp_path / "job.py"
    job.write_text(JOB + NO_SESSION)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "BARRIERFLOW_LOG_DIR": str(tmp_path / "logs"),
    }
    run = subprocess.run(
        [sys.executable, str(job)], capture_output=True, text=True, cwd=tmp_path, env=env,
        timeout=600,  # its own Spark driver: minutes on a busy host
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "active session: None" in run.stderr, run.stderr[-3000:]
    # the console's standard output is exactly the printed records
    check_printed(printed_by_subtask(run.stdout.splitlines()))


def test_barrierflow_run_prints_the_records_among_its_own_lines(tmp_path, spark, monkeypatch):
    """`barrierflow run job.py`, in this process on the suite's session (a second Spark driver
    would double the test's time): the records among where to look and the summary."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    monkeypatch.setenv("BARRIERFLOW_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("BARRIERFLOW_PROGRESS_INTERVAL", "60")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", str(job)])
    assert result.exit_code == 0, result.output[-3000:]
    lines = result.stdout.splitlines()
    records = [line for line in lines if re.match(r"^(tens:)?\d> ", line)]
    check_printed(printed_by_subtask(records))
    assert re.search(r"^job 'print-job' FINISHED after ", result.stdout, re.M), result.stdout


def readme_windows_example() -> str:
    """The README's complete windows job, as the README shows it."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("### Windows, joins, async I/O", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_windows_example_prints_what_the_readme_promises(spark, capsys):
    capsys.readouterr()
    exec(compile(readme_windows_example(), "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    # "it prints `('a', 0, 5)`, `('b', 0, 8)`, `('a', 10000, 5)`" (parallelism 1: no prefix)
    assert sorted(printed) == sorted(["('a', 0, 5)", "('b', 0, 8)", "('a', 10000, 5)"]), printed
