"""Spark's Python workers on the embedded master fork from barrierflow's own daemon, which
imported barrierflow once (cluster/executor/spark_daemon.py), instead of each worker
importing it afresh before its task can run; a stream task's process runs with the
collector's young threshold raised (cluster/executor/young_gc.py)."""

from __future__ import annotations

import gc
import os

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.cluster.executor.young_gc import TASK_YOUNG_THRESHOLD

pytestmark = pytest.mark.spark


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads a process's parent in /proc")
def test_python_workers_fork_from_a_daemon_that_already_imported_barrierflow(spark):
    def worker_facts(_: int) -> tuple[list[str], bool]:
        """In a worker (a nested function goes by value): its parent's command line, and
        whether barrierflow's task modules were imported before this function ran."""
        import sys

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as cmdline:
            parent = [part.decode() for part in cmdline.read().split(b"\0") if part]
        return parent, "barrierflow.cluster.executor.task_entry" in sys.modules

    facts = spark.sparkContext.parallelize(range(4), 4).map(worker_facts).collect()
    for parent, preloaded in facts:
        assert parent[1:3] == ["-m", "barrierflow.cluster.executor.spark_daemon"], parent
        assert preloaded


def test_a_stream_task_runs_with_the_young_threshold_raised(spark):
    assert gc.get_threshold()[0] < TASK_YOUNG_THRESHOLD  # the driver keeps its own
    env = StreamExecutionEnvironment.get_execution_environment().set_parallelism(2)
    thresholds = env.from_collection([1, 2, 3, 4]).map(lambda _: gc.get_threshold()[0])
    with thresholds.execute_and_collect("young-threshold") as records:
        assert sorted(records) == [TASK_YOUNG_THRESHOLD] * 4
