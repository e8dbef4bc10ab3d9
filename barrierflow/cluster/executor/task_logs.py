"""Task logs: a stream task's Python log records travel to the JobMaster, which appends them to
one file per subtask in the job's log folder.

Tasks serve no HTTP and may run on other hosts, so their records go the way every other task
message goes: the task process keeps them in a bounded buffer (`TaskLogForwarder`, a logging
handler, WARNING and above unless the job asks for more) and a small thread sends them in
batches (`TaskLogRecords`) over the task's link to the JobMaster. On the driver, `JobLogs`
holds the job's log folder: `task-<vertex id>-<subtask>.log` per subtask, `jobmaster.log`
(barrierflow's own driver-side lines) and Spark's Python loggers (py4j, pyspark) in
`spark.log` beside the JVM's log (spark_session.redirect_spark_log).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from barrierflow.cluster.log_dir import create_private_file, make_private_dir
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime.task_messages import TaskLogRecord, TaskLogRecords

__all__ = ["JobLogs", "TaskLogForwarder", "format_record", "task_log_name"]

log = logging.getLogger(__name__)

BUFFER_RECORDS = 1000
"""How many records a task keeps before it drops the oldest (a task logging in a loop)."""
BATCH_RECORDS = 200
"""At most this many records in one message."""
FLUSH_S = 0.5
"""How often the forwarding thread sends what was logged."""
SPARK_PYTHON_LOGGERS = ("py4j", "pyspark")
JOBMASTER_LOGGER = "barrierflow"


def task_log_name(subtask: SubtaskId) -> str:
    """The file of a subtask's log in the job's log folder.

    >>> task_log_name(SubtaskId(3, 1))
    'task-3-1.log'
    """
    return f"task-{subtask.vertex_id}-{subtask.subtask_index}.log"


def format_record(record: TaskLogRecord) -> str:
    """One line (more if the record carries a traceback), as the file shows it."""
    when = datetime.fromtimestamp(record.time_ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    text = f"{when} {record.level} [attempt {record.attempt}] {record.logger}: {record.message}"
    return text + ("\n" + record.exception if record.exception else "")


# ---- the task's side ---------------------------------------------------------------------------


class TaskLogForwarder(logging.Handler):
    """Keeps the task process's log records (any thread) for `flush` to send in batches.

    Holds at most BUFFER_RECORDS; when more come before a flush, the oldest go and the next
    batch says how many were dropped."""

    def __init__(self, partition: int, attempt: Callable[[], int], level: int) -> None:
        super().__init__(level)
        self._partition = partition
        self._attempt = attempt
        self._records: collections.deque[TaskLogRecord] = collections.deque(maxlen=BUFFER_RECORDS)
        self._dropped = 0
        self._lock_records = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            exception = ""
            if record.exc_info:
                exception = logging.Formatter().formatException(record.exc_info)
            entry = TaskLogRecord(
                time_ms=int(record.created * 1000),
                level=record.levelname,
                logger=record.name,
                message=record.getMessage(),
                attempt=self._attempt(),
                exception=exception,
            )
        except Exception:  # a record that cannot be formatted is not worth a task failure
            self.handleError(record)
            return
        with self._lock_records:
            if len(self._records) == self._records.maxlen:
                self._dropped += 1
            self._records.append(entry)

    def take(self) -> TaskLogRecords | None:
        """The next batch (None when nothing was logged)."""
        with self._lock_records:
            if not self._records and not self._dropped:
                return None
            count = min(BATCH_RECORDS, len(self._records))
            records = tuple(self._records.popleft() for _ in range(count))
            dropped, self._dropped = self._dropped, 0
        return TaskLogRecords(self._attempt(), self._partition, records, dropped)

    def flush_to(self, send: Callable[[Any], None]) -> None:
        """Send every batch (any thread; `send` must be thread-safe)."""
        while (batch := self.take()) is not None:
            send(batch)


@contextlib.contextmanager
def forwarding_task_logs(
    partition: int, attempt: Callable[[], int], level: int, send: Callable[[Any], None]
):
    """For the block (a stream task's process): forward the root logger's records at `level`
    and above to the JobMaster through `send`, every FLUSH_S and once more at the end."""
    forwarder = TaskLogForwarder(partition, attempt, level)
    root = logging.getLogger()
    # the records go to the subtask's file on the driver, not also to the worker's stderr
    # (which a local master prints on the user's console)
    quieted = [h for h in root.handlers if type(h) is logging.StreamHandler]
    for handler in quieted:
        root.removeHandler(handler)
    root.addHandler(forwarder)
    if root.level > level or root.level == logging.NOTSET:
        root.setLevel(level)
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(FLUSH_S):
            try:
                forwarder.flush_to(send)
            except OSError:  # the JobMaster is gone: the task ends on its own
                return

    thread = threading.Thread(target=run, name="task-logs", daemon=True)
    thread.start()
    try:
        yield forwarder
    finally:
        stop.set()
        thread.join(FLUSH_S * 2)
        root.removeHandler(forwarder)
        for handler in quieted:
            root.addHandler(handler)
        with contextlib.suppress(OSError, ValueError):
            forwarder.flush_to(send)


# ---- the JobMaster's side ------------------------------------------------------------------------


class JobLogs:
    """The job's log folder on the driver: task files, jobmaster.log, Spark's Python loggers.

    `write` on the JobMaster thread only; `close` once, when the job ends."""

    def __init__(self, folder: Path, subtasks: tuple[SubtaskId, ...]) -> None:
        self.folder = folder
        self._subtasks = subtasks
        make_private_dir(folder)
        for name in ("jobmaster.log", "spark.log"):
            create_private_file(folder / name)
        self._handlers: list[tuple[logging.Logger, logging.Handler, bool, int]] = []
        driver = logging.FileHandler(folder / "jobmaster.log", encoding="utf-8")
        driver.setLevel(logging.INFO)
        driver.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
        )
        ours = logging.getLogger(JOBMASTER_LOGGER)
        unconfigured = not logging.getLogger().hasHandlers()
        if unconfigured:
            # Python's last-resort output (warnings, bare) stops once any handler exists:
            # keep the console as it was. Then INFO may reach our file; with the user's own
            # handlers the user's levels decide.
            console = logging.StreamHandler()
            console.setLevel(logging.WARNING)
            self._attach(ours, console, propagate=True, level=logging.INFO)
        self._attach(ours, driver, propagate=True, level=logging.INFO if unconfigured else None)
        spark = logging.FileHandler(folder / "spark.log", encoding="utf-8")
        spark.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        for name in SPARK_PYTHON_LOGGERS:  # off the console, into the file
            self._attach(logging.getLogger(name), spark, propagate=False, level=logging.INFO)

    def _attach(
        self, logger: logging.Logger, handler: logging.Handler, propagate: bool, level: int | None
    ) -> None:
        """Add `handler` to `logger` (and lower its level to `level`) until `close`."""
        self._handlers.append((logger, handler, logger.propagate, logger.level))
        logger.addHandler(handler)
        logger.propagate = propagate
        if level is not None and logger.getEffectiveLevel() > level:
            logger.setLevel(level)

    def write(self, message: TaskLogRecords) -> None:
        """Append a task's batch to its subtask's file (a partition this job lacks is ignored)."""
        if not 0 <= message.partition < len(self._subtasks):
            log.debug("log records of unknown partition %d dropped", message.partition)
            return
        lines = [format_record(record) for record in message.records]
        if message.dropped:
            lines.append(f"... {message.dropped} records dropped (the task logged too fast)")
        path = self.folder / task_log_name(self._subtasks[message.partition])
        try:
            create_private_file(path)
            with path.open("a", encoding="utf-8") as file:
                file.write("".join(line + "\n" for line in lines))
        except OSError as error:
            log.debug("cannot write %s: %s", path, error)

    def close(self) -> None:
        """Detach the handlers and close every file of the folder the driver holds (the
        files stay): a long-lived driver runs many jobs."""
        for logger, handler, propagate, level in reversed(self._handlers):
            logger.removeHandler(handler)
            logger.propagate = propagate
            logger.setLevel(level)
            handler.close()
        self._handlers = []
