"""Executor loss on `local-cluster[2,2,1024]`: separate executor JVMs on this machine, one of
them killed mid-run; the job recovers on a replacement executor from its latest checkpoint and
commits every record exactly once.

A local-cluster needs a SparkContext of its own (one per process), so the check runs in a
subprocess: `barrierflow chaos` with the `jvm` failure kind, driven by a few lines that start
the session first and print the executors before and after.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
MASTER = "local-cluster[2,2,1024]"
SLOTS = 4
"""The word count at parallelism 2 has 4 subtasks (words -> Map, Reduce -> Sink), so a new
barrier stage needs both executors' 2 slots: after a JVM is killed it can only run once the
worker has started a replacement."""

DRIVER = """
import sys
from barrierflow.cluster.spark.session import check_slots, obtain_spark_context

master, slots = sys.argv[1], int(sys.argv[2])
sc = obtain_spark_context(master, slots)
check_slots(sc, slots)  # the executors have registered
jsc = sc._jsc.sc()

def executors():
    return ",".join(sorted(jsc.getExecutorIds().toList().mkString(",").split(",")))

print("executors before:", executors(), flush=True)
from barrierflow.cli import main
try:
    main(sys.argv[3:], standalone_mode=False)
finally:
    print("executors after:", executors(), flush=True)
"""

RECOVERY_LINE = re.compile(
    r"^failure 1/1 at [\d.]+ s: jvm of '[^']+' \(\d/2\) in attempt 0, recovered in (\d+) ms$",
    re.MULTILINE,
)


def test_a_killed_executor_jvm_is_replaced_and_the_job_commits_exactly_once(tmp_path):
    environment = {k: v for k, v in os.environ.items() if k != "BARRIERFLOW_SPARK_LOG_LEVEL"}
    environment.update(
        PYSPARK_PYTHON=sys.executable,
        # executors start Python workers that import this checkout, not an installed copy
        PYTHONPATH=os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
        BARRIERFLOW_LOG_DIR=str(tmp_path / "logs"),
    )
    chaos = ["chaos", str(ROOT / "examples" / "word_count_job.py"), "-n", "1", "--kinds", "jvm"]
    chaos += ["--master", MASTER, "-p", "2", "--seed", "1", "--max-gap", "0.5"]
    chaos += ["--workdir", str(tmp_path / "work"), "--", "--records", "10000", "--rate", "1000"]
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, MASTER, str(SLOTS), *chaos],
        capture_output=True,
        text=True,
        env=environment,
        cwd=tmp_path,
        timeout=600,
    )
    console = result.stdout + result.stderr
    assert result.returncode == 0, console[-4000:]

    recovered = RECOVERY_LINE.search(result.stdout)
    assert recovered, console[-4000:]
    print(f"executor JVM killed on {MASTER}: {recovered.group(0)}")  # the recovery time
    assert "; 0 lost, 0 duplicated" in result.stdout, console[-4000:]
    assert "exactly-once: OK" in result.stdout, console[-4000:]

    # The JVM was really lost (its exit code 137: SIGKILL), and the stage that recovered ran
    # on a replacement: both executors registered at the end, one of them new.
    # Spark's own log goes to spark.log in each job's log folder, not to the console: not
    # even the stack trace the JVM prints itself when a local-cluster's thread pool rejects
    # a task while it shuts down (it did, under load).
    spark_logs = "".join(p.read_text() for p in (tmp_path / "logs").glob("*/spark.log"))
    assert "Lost executor" in spark_logs and "exited with code 137" in spark_logs
    assert "\tat " not in console and "Exception" not in result.stderr, console[-4000:]
    before = re.search(r"^executors before: (.*)$", result.stdout, re.MULTILINE)
    after = re.search(r"^executors after: (.*)$", result.stdout, re.MULTILINE)
    assert before and after, console[-4000:]
    before_ids, after_ids = set(before.group(1).split(",")), set(after.group(1).split(","))
    assert len(before_ids) == 2 and len(after_ids) == 2, (before_ids, after_ids)
    assert len(after_ids - before_ids) == 1, (before_ids, after_ids)
    assert "attempt 0 failed" in result.stderr and "restarting in a new stage" in result.stderr
