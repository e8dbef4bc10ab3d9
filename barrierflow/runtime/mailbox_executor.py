"""MailboxExecutor: how code off the mailbox thread hands work to a task's single thread.

A task runs everything that touches operators on one thread, its mailbox loop.
Another thread (an async I/O helper, a timer) never calls an operator; it hands
an action to the task with `execute`, and the loop runs it in FIFO order with the
task's other mails. An operator that cannot go on until such an action arrives
does not wait: it says so with `StreamOperator.accepts_input()` returning False,
returns, and the loop keeps handling mails (checkpoints, credit, cancellation)
until the operator accepts input again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class MailboxExecutor(Protocol):
    """Runs actions on a task's mailbox thread; `execute` may be called from any thread."""

    def execute(self, action: Callable[[], None], description: str) -> None:
        """Run `action` on the mailbox thread after the mails already queued."""
        ...


class NoMailbox:
    """The executor of an operator that runs outside a task (unit tests set their own)."""

    def execute(self, action: Callable[[], None], description: str) -> None:
        raise RuntimeError(f"no mailbox to run {description!r}: the operator is not in a task")


NO_MAILBOX: MailboxExecutor = NoMailbox()
