"""What a Spark task runs: one stream task, attempt after attempt, in a supervised child.

The payload is `(descriptors, settings)`: the `TaskDescriptor` of every subtask by
SubtaskId (`graph.deployment.build_task_descriptors`) and the first attempt's
`TaskSettings`. The Spark task connects to the JobMaster once and runs the stream
task in a child process (task_process.py), relaying its messages. When an attempt
ends by failure or by the JobMaster's EndAttempt (the job rolls back in place), the
stream task keeps its process and waits for RestartTask, then runs the next attempt
in the same process and slot (`run_attempts`); a CancelTask, a lost connection or no
word within the bound end it. When the child dies, the Spark task reports it and
starts a new child for the next attempt.
"""

from __future__ import annotations

import functools
import logging
import pickle
import queue
import socket
from collections.abc import Iterable, Iterator
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.cluster.addresses import executor_host
from barrierflow.cluster.executor.task_console import forwarding_task_console
from barrierflow.cluster.executor.task_logs import forwarding_task_logs
from barrierflow.cluster.executor.task_process import ParentLink, TaskSupervisor
from barrierflow.cluster.executor.young_gc import raise_young_threshold
from barrierflow.cluster.rpc import RpcClient
from barrierflow.errors import ExecutorImportError, StreamCorruptionError
from barrierflow.runtime.attempt_outcome import AttemptEnd
from barrierflow.runtime.deployment import TaskDescriptor, TaskSettings
from barrierflow.runtime.mails import RpcLost, RpcReceived
from barrierflow.runtime.task import StreamTask
from barrierflow.runtime.task_messages import (
    JOBMASTER_TO_TASK,
    CancelTask,
    EndAttempt,
    RestartTask,
)

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How long one wait on the mailbox blocks while waiting for the next attempt."""


def run_partitions(payload: bytes, partitions: Iterable[int]) -> Iterator[Any]:
    """The mapPartitions function of the barrier stage: one partition = one subtask."""
    logging.basicConfig(level=logging.WARNING)
    descriptors, settings = load_payload(payload)
    host = executor_host()
    for partition in partitions:
        mailbox: queue.SimpleQueue = queue.SimpleQueue()
        rpc = RpcClient(
            settings.jobmaster_address,
            settings.secret,
            mailbox.put,
            job_id=settings.job_id,
            executor_host=host,
        )
        descriptor = descriptors[settings.partitions[partition]]
        body = functools.partial(run_stream_task, descriptor, partition, executor_host=host)
        try:
            TaskSupervisor(settings, partition, rpc.send, mailbox, body).run()
        finally:
            rpc.close()
    return iter(())


def load_payload(payload: bytes) -> tuple[dict, TaskSettings]:
    """The attempt's descriptors and settings; an ExecutorImportError naming the module, this
    host and the fixes if the job's code needs a module this executor's Python lacks."""
    try:
        return pickle.loads(payload)
    except ImportError as error:
        raise ExecutorImportError(import_error_message(error, socket.gethostname())) from None


def import_error_message(error: ImportError, host: str) -> str:
    """Why the executor on `host` cannot load the job, and how to ship what it lacks.

    >>> print(import_error_message(ModuleNotFoundError("No module named 'geo'", name="geo"),
    ...                            "node7"))  # doctest: +ELLIPSIS
    the executor on node7 cannot import module 'geo' ...: ship it with --py-files ...
    """
    module = error.name or str(error)
    return (
        f"the executor on {host} cannot import module '{module}' that the job's code needs "
        f"({type(error).__name__}: {error}); it is on the driver's path but not on the "
        f"executors': ship it with --py-files FILE.py|FILE.zip (or env.add_python_file(path) "
        f"in the job file), install it in the executors' Python, or run the executors in a "
        f"packed environment (--archives env.tar.gz#environment with --conf "
        f"spark.pyspark.python=./environment/bin/python)"
    )


def run_stream_task(
    descriptor: TaskDescriptor,
    partition: int,
    settings: TaskSettings,
    link: ParentLink,
    *,
    executor_host: str | None = None,
) -> None:
    """The child process's work: the stream task's attempts, talking through `link`."""
    raise_young_threshold()
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    link.start(mailbox.put)
    level = logging.getLevelName(settings.task_log_level.upper())
    tasks: list[StreamTask] = []
    attempt = lambda: tasks[0].attempt if tasks else settings.attempt  # noqa: E731
    with (
        forwarding_task_logs(
            partition, attempt, level if isinstance(level, int) else logging.WARNING, link.send
        ),
        forwarding_task_console(partition, attempt, link.send),  # print sinks: driver console
    ):
        tasks.append(
            StreamTask(
                descriptor, settings, partition, link.send, mailbox, executor_host=executor_host
            )
        )
        run_attempts(tasks[0])


def run_attempts(task: StreamTask, clock: Clock = SYSTEM_CLOCK) -> AttemptEnd:
    """Run `task`'s attempts until one finishes or the task is cancelled; returns how the
    last one ended."""
    while True:
        end = task.run()
        if end in (AttemptEnd.FINISHED, AttemptEnd.CANCELLED):
            return end
        settings = wait_for_restart(task, clock)
        if settings is None:
            return end
        task.restart(settings)


def wait_for_restart(task: StreamTask, clock: Clock = SYSTEM_CLOCK) -> TaskSettings | None:
    """After an attempt ended: the next attempt's settings (RestartTask), or None when the
    JobMaster cancels the task, is gone, or says nothing in time.

    The bound is the task's connect timeout, extended by the restart delay once EndAttempt
    announced it. Mails of the ended attempt (its channels, its actions, its checkpoint
    messages) are dropped: they belong to an attempt that no longer exists here.
    """
    timeout_s = task.settings.connect_timeout_s
    deadline = clock.monotonic() + timeout_s
    while (remaining := deadline - clock.monotonic()) > 0:
        try:
            mail = task.mailbox.get(timeout=min(remaining, POLL_S))
        except queue.Empty:
            continue
        if isinstance(mail, RpcLost):
            return None
        if not isinstance(mail, RpcReceived):
            continue
        message = mail.message
        if not isinstance(message, JOBMASTER_TO_TASK):
            raise StreamCorruptionError(f"unknown message from the JobMaster: {message!r}")
        if isinstance(message, RestartTask) and message.attempt > task.attempt:
            return message.settings
        if isinstance(message, CancelTask) and message.attempt >= task.attempt:
            return None
        if isinstance(message, EndAttempt) and message.attempt == task.attempt:
            deadline = clock.monotonic() + message.restart_delay_ms / 1000 + timeout_s
    log.warning(
        "task %s waited %.0f s for its next attempt after attempt %d; giving up",
        task.subtask,
        timeout_s,
        task.attempt,
    )
    return None
