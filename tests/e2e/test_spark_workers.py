"""Spark's Python workers on the embedded master fork from barrierflow's own daemon, which
imported barrierflow once (cluster/executor/spark_daemon.py), instead of each worker
importing it afresh before its task can run."""

from __future__ import annotations

import os

import pytest

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
