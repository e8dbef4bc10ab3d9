"""PySpark's Python worker daemon with barrierflow imported before it forks any worker.

Spark starts one daemon per executor (`python -m <spark.python.daemon.module>`) and forks
a worker from it for every Python task. With PySpark's own daemon each worker imports
barrierflow afresh when it unpickles its task (about a second of CPU here), so a job at
parallelism 2 spends seconds of CPU on imports before its tasks run. Imported once in
the daemon, every worker inherits the modules at fork. Used only where the workers run
the driver's own interpreter and installation (local[N], `session.PRELOADING_DAEMON`).
"""

from __future__ import annotations

from pyspark.daemon import manager

import barrierflow.cluster.executor.task_entry  # noqa: F401  (the task's modules, preloaded)

if __name__ == "__main__":
    manager()
