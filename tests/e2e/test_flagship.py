"""The README's first command: the flagship example, as a user runs it and reads it."""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from barrierflow.cli import main

from .conftest import read_rows

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLAGSHIP = EXAMPLES / "flagship.py"
FAILURE_LINE = re.compile(
    r"^failure (\d)/3 at [\d.]+ s: (exception|kill|executor) of ('[^']+' \(\d/2\)) "
    r"in attempt (\d+), recovered in \d+ ms$",
    re.MULTILINE,
)
ATTEMPT_LINE = re.compile(r"^job 'flagship-word-count' attempt (\d+) failed: (.*)$", re.MULTILINE)
ROOT_CAUSE = {
    # kind: (what the attempt's failure line must say, how the job recovered)
    "exception": ("ChaosFailure: injected by barrierflow chaos", "restarting in place"),
    "kill": ("died: its process was killed by SIGKILL", "restarting in place"),
    "executor": ("died: its process was killed or exited", "restarting in a new stage"),
}


def test_the_flagship_checks_its_job_file_under_three_kinds_of_failure_one_line_each(tmp_path):
    # Regression (issue 9, defect 5): an attempt's failure line named a survivor that lost
    # its channel, cut at "Traceback (most recent call last):", under a page of Java. And an
    # injected exception added the task's own warning to the JobMaster's line (two lines).
    environment = {k: v for k, v in os.environ.items() if k != "BARRIERFLOW_SPARK_LOG_LEVEL"}
    # 12 s of input at 1000 words/s: room for three failures on a busy machine (each waits
    # for a checkpoint, 1 s apart, and a gap; a restore paces afresh, recoveries cost none)
    arguments = ["--records", "12000", "--rate", "1000", "--workdir", str(tmp_path)]
    result = subprocess.run(
        [sys.executable, str(FLAGSHIP), *arguments],
        capture_output=True,
        text=True,
        env={**environment, "PYSPARK_PYTHON": sys.executable},
        timeout=400,
    )
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-3000:]
    assert result.stdout.rstrip().endswith("exactly-once: OK"), console[-3000:]
    assert "; 0 lost, 0 duplicated" in result.stdout, console[-3000:]

    # One line per injected failure, its kind and its recovery, each kind once.
    failures = FAILURE_LINE.findall(result.stdout)
    assert [int(n) for n, *_ in failures] == [1, 2, 3], console[-3000:]
    assert sorted(kind for _, kind, _, _ in failures) == ["exception", "executor", "kill"]

    # The JobMaster's line for each failed attempt names the task and the root cause.
    attempts = dict(ATTEMPT_LINE.findall(result.stderr))
    assert sorted(attempts) == sorted(attempt for *_, attempt in failures), console[-3000:]
    for _, kind, task, attempt in failures:
        line = attempts[attempt]
        cause, recovery = ROOT_CAUSE[kind]
        assert line.startswith(f"task {task}") or f"(task {task})" in line, line
        assert cause in line and recovery in line, line

    # Nothing else says it failed, and no stack-trace pages anywhere.
    failed = [line for line in console.splitlines() if " failed" in line]
    assert len(failed) == 3, failed
    java = ("\tat org.apache", "Exception in thread", "py4j", "java.lang.")
    for page in ("Traceback", "Exception in task", "lost the output channel", *java):
        assert page not in console, console[-3000:]
    # Each run wrote into its own folder under --workdir.
    runs = sorted(p.name for p in tmp_path.iterdir())
    assert runs == [".barrierflow-chaos", "chaos", "reference"], runs


def test_the_flagships_job_file_runs_under_barrierflow_run_and_counts_every_word(
    spark, tmp_path, monkeypatch
):
    """The job file the flagship checks is an ordinary job file, and its output is right (the
    flagship compares two runs of it; this pins one of them to the expected counts)."""
    monkeypatch.chdir(tmp_path)
    job = EXAMPLES / "word_count_job.py"
    out = tmp_path / "out"
    arguments = ["run", str(job), "--checkpoint-dir", str(tmp_path / "chk"), "--"]
    arguments += ["--records", "3000", "--rate", "100000", "--out", str(out)]
    result = CliRunner().invoke(main, arguments, catch_exceptions=False)

    assert result.exit_code == 0, result.output[-3000:]
    word_of = runpy.run_path(str(job))["word_of"]
    totals = Counter(word_of(i) for i in range(3000))
    expected = Counter((word, n) for word, total in totals.items() for n in range(1, total + 1))
    assert read_rows(out) == expected
