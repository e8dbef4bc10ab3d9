"""The Spark side: obtain a session, check slots, and run one attempt as a barrier stage.

One attempt is one Spark job with a single barrier-mode stage of one task per
subtask; Spark gang-schedules them, so every subtask runs at once. The JobMaster
sees only the narrow `AttemptRunner` protocol (submit, cancel); `SparkAttemptRunner`
is its production side, and tests pass a fake.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, Protocol

from barrierflow.cluster.java import ensure_java_home
from barrierflow.cluster.mails import Mail, SparkJobEnded
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


def run_attempt(spark: Any, payload: bytes, subtask_count: int, job_group: str, name: str) -> None:
    """Blocks until every task of the attempt has ended; raises if the Spark job failed."""
    from barrierflow.cluster.task_entry import run_partitions

    sc = spark.sparkContext
    sc.setJobGroup(job_group, name, interruptOnCancel=True)
    rdd = sc.parallelize(range(subtask_count), subtask_count)
    rdd.barrier().mapPartitions(functools.partial(run_partitions, payload)).collect()


def cancel_attempt(spark: Any, job_group: str) -> None:
    spark.sparkContext.cancelJobGroup(job_group)


def spark_error_summary(error: BaseException) -> str:
    """The useful line of a py4j/Spark error (the Python traceback of the task if any)."""
    text = str(error)
    for marker in ("Python worker exited unexpectedly", "Traceback (most recent call last)"):
        position = text.find(marker)
        if position >= 0:
            return text[position : position + 2000]
    return text[:2000]


def spark_error_headline(summary: str) -> str:
    """One line of a Spark error summary: the Python exception line of its traceback if it
    has one, else its first line.

    >>> spark_error_headline(
    ...     "PythonException: Traceback (most recent call last):\\n"
    ...     '  File "job.py", line 3, in f\\n    1 / 0\\nZeroDivisionError: division by zero\\n'
    ... )
    'ZeroDivisionError: division by zero'
    """
    lines = [line for line in summary.strip().splitlines() if line.strip()]
    if not lines:
        return "no detail"
    for index, line in enumerate(lines):
        if "Traceback (most recent call last)" in line:
            for after in lines[index + 1 :]:
                if not after[:1].isspace():
                    return after.strip()
    return lines[0].strip()


class AttemptRunner(Protocol):
    """Where an attempt's tasks run. Called on the JobMaster thread; never blocks it."""

    bind_host: str
    """The address tasks reach the driver at (the RPC endpoint listens there)."""

    def submit(self, payload: bytes, group: str, attempt: int) -> None:
        """Start one task per subtask running `payload`; post SparkJobEnded(attempt, ...)
        once they all ended."""
        ...

    def cancel(self, group: str) -> None:
        """Kill the tasks of the attempt submitted as `group` (its SparkJobEnded follows)."""
        ...


RunnerFactory = Callable[[str | None, int, str, Callable[[Mail], None]], AttemptRunner]
"""(Spark master, subtask count, job name, post) -> the runner of the job's attempts."""


class SparkAttemptRunner:
    """Runs each attempt as one Spark barrier job, waited for on a thread of its own."""

    def __init__(self, spark: Any, subtask_count: int, job_name: str, post: Callable[[Mail], None]):
        self._spark = spark
        self._subtask_count = subtask_count
        self._job_name = job_name
        self._post = post
        master = spark.sparkContext.master
        self.bind_host = (
            "127.0.0.1"
            if is_local_master(master)
            else spark.sparkContext.getConf().get("spark.driver.host", "127.0.0.1")
        )

    @classmethod
    def connect(
        cls, master: str | None, subtask_count: int, job_name: str, post: Callable[[Mail], None]
    ) -> SparkAttemptRunner:
        """Obtain a session on `master` and check it offers a slot per subtask."""
        spark = obtain_spark(master, subtask_count)
        check_slots(spark, subtask_count)
        return cls(spark, subtask_count, job_name, post)

    def submit(self, payload: bytes, group: str, attempt: int) -> None:
        threading.Thread(
            target=self._run,
            args=(payload, group, attempt),
            daemon=True,
            name=f"spark-attempt-{attempt}",
        ).start()

    def cancel(self, group: str) -> None:
        cancel_attempt(self._spark, group)

    def _run(self, payload: bytes, group: str, attempt: int) -> None:
        try:
            run_attempt(self._spark, payload, self._subtask_count, group, self._job_name)
        except BaseException as error:
            self._post(SparkJobEnded(attempt, spark_error_summary(error)))
        else:
            self._post(SparkJobEnded(attempt, None))
