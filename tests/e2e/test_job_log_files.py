"""A job's log folder on the driver: nothing of it stays open in the driver's Python process
once the job ended, and its JVM holds only the last job's spark.log (what Spark prints after
a job goes there, never to the console) — never one file per job (issue 21: two descriptors
per job were left, seen in a long test session)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .jobs import paced_word_count

pytestmark = pytest.mark.spark


def open_files_under(pid: int, folder: Path) -> list[str]:
    """The files under `folder` process `pid` holds open (its /proc/<pid>/fd)."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith(str(folder) + os.sep):
            found.append(target)
    return sorted(found)


def test_two_jobs_in_one_driver_leave_only_the_last_spark_log_open(spark, tmp_path, monkeypatch):
    logs = tmp_path / "logs"
    monkeypatch.setenv("BARRIERFLOW_LOG_DIR", str(logs))
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    for run in range(2):
        env = paced_word_count(tmp_path / f"run-{run}", 200, None)
        env.execute(f"log-files-{run}")
        folders = sorted(p.name for p in logs.iterdir())
        assert len(folders) == run + 1, folders
        assert (logs / folders[-1] / "spark.log").is_file()
        assert (logs / folders[-1] / "jobmaster.log").is_file()
        held = {
            "python": open_files_under(os.getpid(), logs),
            "jvm": open_files_under(jvm_pid, logs),
        }
        last = str(logs / folders[-1] / "spark.log")
        assert held["python"] == [], f"after job {run}: {held}"
        assert set(held["jvm"]) <= {last}, f"after job {run}: {held}"
        modes = {p.name: oct(p.stat().st_mode & 0o777) for p in (logs / folders[-1]).iterdir()}
        assert set(modes.values()) == {"0o600"}, modes  # log4j2.properties, spark.log, ...
