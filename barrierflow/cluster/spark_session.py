"""The Spark session a job runs on: obtaining it, and the task slots and executors it offers.

The embedded default is `local[N]` on loopback; any other master is used as the user (or
`spark-submit`) configured it.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from barrierflow.cluster.java import ensure_java_home
from barrierflow.errors import InsufficientResourcesError

log = logging.getLogger(__name__)

EMBEDDED_CONFIG = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # A killed Python worker keeps running until this timeout: keep zombies short.
    "spark.python.task.killTimeout": "1s",
    "spark.sql.shuffle.partitions": "4",
}


def is_local_master(master: str) -> bool:
    return master.startswith("local")


def embedded_master(slots_needed: int) -> str:
    """Spark `local[*]`, widened to the job's subtask count: a barrier stage needs one slot
    per task, and local[N] gives N slots whatever the cores."""
    return f"local[{max(os.cpu_count() or 1, slots_needed)}]"


def obtain_spark(master: str | None, slots_needed: int) -> Any:
    """The active SparkSession, or a new one on `master` (the embedded default if None)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    ensure_java_home()
    builder = SparkSession.builder.appName("barrierflow")
    builder = builder.master(master or embedded_master(slots_needed))
    if master is None or is_local_master(master):
        # Everything stays on loopback (and Spark stops warning about the host name).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        for key, value in EMBEDDED_CONFIG.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    level = os.environ.get("BARRIERFLOW_SPARK_LOG_LEVEL")
    spark.sparkContext.setLogLevel(level or "ERROR")
    if level is None and is_local_master(spark.sparkContext.master):
        _quiet_task_failures(spark)
    return spark


def _quiet_task_failures(spark: Any) -> None:
    """In the embedded Spark, a failed task (a killed stream task, say) would print the
    executor's Java stack trace in the job's console; the JobMaster already reports the
    cause in one line, so the executor's logger keeps only fatal messages. Setting
    BARRIERFLOW_SPARK_LOG_LEVEL shows everything again."""
    jvm = spark.sparkContext._jvm
    try:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.executor.Executor", jvm.org.apache.logging.log4j.Level.FATAL
        )
    except Exception as error:  # another logging backend: keep Spark's output as it is
        log.debug("cannot quiet Spark's executor log: %s", error)


def check_slots(spark: Any, slots_needed: int) -> None:
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        slots = jsc.maxNumConcurrentTasks(profile)
    except Exception:  # older or restricted gateways: fall back to the default parallelism
        slots = sc.defaultParallelism
    if slots < slots_needed:
        raise InsufficientResourcesError(
            f"the job has {slots_needed} subtasks but Spark master {sc.master} offers {slots} "
            f"task slots; a barrier stage needs one slot per subtask. Lower the parallelism, "
            f"add executors, or run on local[{slots_needed}]"
        )


def executor_hosts(spark: Any) -> frozenset[str]:
    """The hosts of the executors registered now (the driver's own entry excluded)."""
    raise NotImplementedError  # issue 12: spark_session owner
