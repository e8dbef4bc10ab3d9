"""The README's first command: the flagship example, as a user runs it and reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

FLAGSHIP = Path(__file__).resolve().parents[2] / "examples" / "flagship.py"


def test_the_flagship_recovers_exactly_once_and_reports_the_killed_task_in_one_line(tmp_path):
    # Regression (issue 9, defect 5): the attempt's failure line named a survivor that lost
    # its channel, cut at "Traceback (most recent call last):", under a page of Java.
    environment = {k: v for k, v in os.environ.items() if k != "BARRIERFLOW_SPARK_LOG_LEVEL"}
    result = subprocess.run(
        [sys.executable, str(FLAGSHIP), "--records", "20000", "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**environment, "PYSPARK_PYTHON": sys.executable},
        timeout=400,
    )
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-3000:]
    assert result.stdout.rstrip().endswith("exactly-once: OK"), console[-3000:]
    failures = [line for line in console.splitlines() if "attempt 0 failed" in line]
    assert len(failures) == 1, console[-3000:]
    assert "task 'Reduce -> Sink'" in failures[0] and "died" in failures[0], failures[0]
    for page in ("Traceback", "\tat org.apache", "Exception in task", "lost the output channel"):
        assert page not in console, console[-3000:]
