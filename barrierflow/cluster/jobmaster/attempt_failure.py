"""Why an attempt failed, as the user reads it: one line first, the original exception chained.

A task's failure arrives as a `TaskFailure`; the driver rebuilds the task's own
exception from its pickled form (falling back to `RemoteTaskError` naming type and
message) and attaches the remote traceback as a note, so the user sees the
original type and message first and the task-side stack below it.
"""

from __future__ import annotations

import pickle
import re
from dataclasses import dataclass

from barrierflow.errors import RemoteTaskError
from barrierflow.runtime.task_messages import TaskFailure


@dataclass(frozen=True)
class AttemptFailure:
    """The root cause of an attempt's failure."""

    summary: str
    """One line, e.g. "ZeroDivisionError: division by zero (task 'words -> Map' (2/2))"."""
    cause: BaseException | None = None
    """The original exception (chained as the job error's __cause__), if there is one."""
    secondary: bool = False
    """A consequence of another failure (a lost peer): never preferred as the root cause."""
    fatal: bool = False
    """No restart can help (the tasks cannot reach the JobMaster): the job fails at once with
    `cause`, whatever the restart strategy."""
    task: str | None = None
    """The task it came from (e.g. "'count' (1/2)"), for the exception history."""
    traceback: str | None = None
    """The task's remote traceback, if it sent one."""
    position: str | None = None
    """Where in the input it happened, if the task knew (the source split and offset of the
    batch a user function chained to the source was processing)."""
    signature: str | None = None
    """What makes two failures the same (task, exception type, message), for telling a record
    that always fails (repeated_failures.py); None for a failure that may not come again at
    the same record (injected by chaos, a lost process or connection, an unreachable
    system)."""


class AttemptFailed(Exception):
    """Raised on the JobMaster thread to end an attempt; carries its root cause."""

    def __init__(self, failure: AttemptFailure) -> None:
        super().__init__(failure.summary)
        self.failure = failure


def task_failure(failure: TaskFailure, task: str) -> AttemptFailure:
    """The failure a task reported, named by `task` (e.g. "'count' (1/2)")."""
    headline = failure.headline.splitlines()[0] if failure.headline else failure.type_name
    at = f"; at {failure.position}" if failure.position else ""
    deterministic = not (failure.transient or failure.lost_peer)
    return AttemptFailure(
        summary=f"{headline} (task {task}{at})",
        cause=rebuild_exception(failure, task),
        secondary=failure.lost_peer,
        task=task,
        traceback=failure.traceback or None,
        position=failure.position,
        signature=failure_signature(task, failure.type_name, failure.message)
        if deterministic
        else None,
    )


def failure_signature(task: str, type_name: str, message: str) -> str:
    """The same for the same error of the same task: the message with memory addresses
    (`0x7f3a...`, which differ between processes) left out.

    >>> failure_signature("'m' (1/1)", "builtins.ValueError", "bad <Row at 0x7f3a2c>")
    "'m' (1/1) builtins.ValueError: bad <Row at 0x?>"
    """
    return f"{task} {type_name}: {_ADDRESS.sub('0x?', message)}"


_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def rebuild_exception(failure: TaskFailure, task: str) -> BaseException:
    """The task's exception, unpickled if possible, with the remote traceback as a note."""
    error: BaseException | None = None
    if failure.pickled is not None:
        try:
            loaded = pickle.loads(failure.pickled)
        except Exception:
            loaded = None
        if isinstance(loaded, BaseException):
            error = loaded
    if error is None:
        error = RemoteTaskError(failure.headline)
    error.add_note(f"Remote traceback of task {task} in {failure.where}:\n{failure.traceback}")
    return error
