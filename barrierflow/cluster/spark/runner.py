"""The Spark side of a job's attempts: run each as one barrier stage, cancel it.

One attempt is one Spark job with a single barrier-mode stage of one task per
subtask; Spark gang-schedules them, so every subtask runs at once. The JobMaster
sees only the narrow `AttemptRunner` protocol (submit, cancel); `SparkAttemptRunner`
is its production side, and tests pass a fake. A barrier stage starts all its tasks or
none: while other Spark jobs hold task slots it waits, so the runner also tells the
JobMaster when Spark started the tasks (`SparkTasksLaunched`), and the JobMaster times
their registration from then, not from the submission.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from barrierflow.cluster.addresses import JobAddresses, resolve_addresses
from barrierflow.cluster.mails import Mail, SparkJobEnded, SparkTasksLaunched
from barrierflow.cluster.spark.session import (
    SparkOptions,
    check_slots,
    conf_getter,
    executor_hosts,
    obtain_spark_context,
    redirect_spark_log,
)
from barrierflow.errors import ExecutorImportError, JobMasterUnreachableError, RemoteTaskError

log = logging.getLogger(__name__)


def run_attempt(sc: Any, payload: bytes, subtask_count: int, job_group: str, name: str) -> None:
    """Blocks until every task of the attempt has ended; raises if the Spark job failed."""
    from barrierflow.cluster.executor.task_entry import run_partitions

    sc.setJobGroup(job_group, name, interruptOnCancel=True)
    rdd = sc.parallelize(range(subtask_count), subtask_count)
    rdd.barrier().mapPartitions(functools.partial(run_partitions, payload)).collect()


def cancel_attempt(sc: Any, job_group: str) -> None:
    sc.cancelJobGroup(job_group)


LAUNCH_POLL_S = 0.25
"""How often the runner asks Spark whether an attempt's barrier stage has started."""


def tasks_launched(tracker: Any, group: str, count: int) -> bool:
    """Whether Spark started the `count` tasks of job group `group`'s stage (running now, or
    already ended): a barrier stage starts all of them at once, once that many slots are free.
    `tracker` is Spark's StatusTracker (answers may lag or be missing: then False)."""
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is None:
                continue
            started = stage.numActiveTasks + stage.numCompletedTasks + stage.numFailedTasks
            if started >= count:
                return True
    return False


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


def spark_job_error(summary: str) -> BaseException:
    """The exception a failed Spark job stands for: the task's ExecutorImportError or
    JobMasterUnreachableError (no restart can fix those), else a RemoteTaskError with the
    summary's headline.

    >>> spark_job_error("Traceback (most recent call last):\\n  x\\n"
    ...                 "barrierflow.errors.ExecutorImportError: no geo")
    ExecutorImportError('no geo')
    >>> spark_job_error("barrierflow.errors.JobMasterUnreachableError: executor on h")
    JobMasterUnreachableError('executor on h')
    >>> spark_job_error("ZeroDivisionError: division by zero")
    RemoteTaskError('ZeroDivisionError: division by zero')
    """
    headline = spark_error_headline(summary)
    name, sep, message = headline.partition(": ")
    for kind in (ExecutorImportError, JobMasterUnreachableError):
        if sep and name.rpartition(".")[2] == kind.__name__:
            return kind(message)
    return RemoteTaskError(headline)


class AttemptRunner(Protocol):
    """Where an attempt's tasks run. Called on the JobMaster thread; never blocks it."""

    addresses: JobAddresses
    """Where the JobMaster's endpoints and the tasks' data servers listen, and what the
    tasks are told to connect to (cluster/addresses.py)."""
    reports_launches: bool
    """Whether `submit` posts SparkTasksLaunched once Spark started the attempt's tasks."""

    def executor_hosts(self) -> frozenset[str]:
        """The hosts the tasks may run on (executors registered now)."""
        ...

    def submit(self, payload: bytes, group: str, attempt: int) -> None:
        """Start one task per subtask running `payload`; post SparkTasksLaunched(attempt)
        once Spark started them (if `reports_launches`), SparkJobEnded(attempt, ...) once
        they all ended."""
        ...

    def cancel(self, group: str) -> None:
        """Kill the tasks of the attempt submitted as `group` (its SparkJobEnded follows)."""
        ...

    def log_to(self, folder: Path) -> None:
        """Write the driver's Spark log into `folder` (the job's log folder) from now on."""
        ...

    def wait_ended(self, group: str, timeout_s: float) -> bool:
        """Block until the Spark job submitted as `group` ended (at once if it did, or was
        never submitted), at most `timeout_s`; whether it did. Only for the job's end."""
        ...


RunnerFactory = Callable[[str | None, int, str, Callable[[Mail], None]], AttemptRunner]
"""(Spark master, subtask count, job name, post) -> the runner of the job's attempts."""


class SparkAttemptRunner:
    """Runs each attempt as one Spark barrier job, waited for on a thread of its own, and
    watches on another when Spark starts its tasks."""

    reports_launches = True

    def __init__(self, sc: Any, subtask_count: int, job_name: str, post: Callable[[Mail], None]):
        self._sc = sc
        self._subtask_count = subtask_count
        self._job_name = job_name
        self._post = post
        self.addresses = resolve_addresses(sc.master, conf_getter(sc))
        self.spark_ui_url: str | None = getattr(sc, "uiWebUrl", None)
        """The application's Spark UI (None when `spark.ui.enabled` is false)."""
        self._lock = threading.Lock()
        self._cancelled: set[str] = set()
        self._ended = threading.Condition(self._lock)
        self._running: set[str] = set()
        """The groups whose Spark job was submitted and has not ended yet."""

    @classmethod
    def connect(
        cls,
        master: str | None,
        subtask_count: int,
        job_name: str,
        post: Callable[[Mail], None],
        options: SparkOptions | None = None,
    ) -> SparkAttemptRunner:
        """Obtain a SparkContext on `master` with `options` and wait (bounded) until it offers
        a slot per subtask."""
        sc = obtain_spark_context(master, subtask_count, options)
        check_slots(sc, subtask_count)
        return cls(sc, subtask_count, job_name, post)

    def executor_hosts(self) -> frozenset[str]:
        return executor_hosts(self._sc)

    def submit(self, payload: bytes, group: str, attempt: int) -> None:
        with self._lock:
            self._running.add(group)
        threading.Thread(
            target=self._run,
            args=(payload, group, attempt),
            daemon=True,
            name=f"spark-attempt-{attempt}",
        ).start()

    def log_to(self, folder: Path) -> None:
        redirect_spark_log(self._sc, folder)

    def cancel(self, group: str) -> None:
        with self._lock:
            self._cancelled.add(group)
        cancel_attempt(self._sc, group)

    def wait_ended(self, group: str, timeout_s: float) -> bool:
        with self._ended:
            return self._ended.wait_for(lambda: group not in self._running, timeout_s)

    def _run(self, payload: bytes, group: str, attempt: int) -> None:
        try:
            # After a lost executor its replacement registers a few seconds later; Spark
            # itself would recheck a short barrier stage only every 15 s.
            check_slots(self._sc, self._subtask_count)
            with self._lock:
                if group in self._cancelled:  # cancelled while waiting: never submit it
                    raise InterruptedError(f"attempt {attempt} was cancelled before it started")
            threading.Thread(
                target=self._watch_launch,
                args=(group, attempt),
                daemon=True,
                name=f"spark-launch-{attempt}",
            ).start()
            run_attempt(self._sc, payload, self._subtask_count, group, self._job_name)
        except BaseException as error:
            self._post(SparkJobEnded(attempt, spark_error_summary(error)))
        else:
            self._post(SparkJobEnded(attempt, None))
        finally:
            with self._ended:
                self._running.discard(group)
                self._ended.notify_all()

    def _watch_launch(self, group: str, attempt: int) -> None:
        """Post SparkTasksLaunched(attempt) once Spark started the stage of `group`; give up
        when its Spark job ended (SparkJobEnded says the rest)."""
        while True:
            with self._ended:
                if group not in self._running:
                    return
            try:
                tracker = self._sc.statusTracker()
                launched = tasks_launched(tracker, group, self._subtask_count)
            except Exception:  # cannot tell: time the registration from now, as if started
                log.warning("cannot tell whether Spark started attempt %d", attempt, exc_info=True)
                launched = True
            if launched:
                self._post(SparkTasksLaunched(attempt))
                return
            with self._ended:
                self._ended.wait_for(lambda: group not in self._running, LAUNCH_POLL_S)
