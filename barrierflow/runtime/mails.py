"""The mails of a task's mailbox: typed, frozen, each naming the attempt it belongs to.

Helper threads (channel readers, the RPC reader, operators' helpers through the
`MailboxExecutor`) never act on the task; they post one of these and the mailbox
thread handles it. A mail of another attempt than the task's is refused by its
number (a zombie channel of an earlier attempt cannot touch a newer one); a mail of
a type the task does not know is an error. `attempt` None means the mail concerns
the process, not an attempt (the JobMaster connection; RPC messages carry their own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any


@dataclass(frozen=True)
class InputReceived:
    """An element arrived on an input channel, with the frame it came in."""

    attempt: int
    channel: int
    element: Any
    frame: bytes | None = None


@dataclass(frozen=True)
class CreditReceived:
    """A receiver granted `credit` more buffers on output channel `channel`."""

    attempt: int
    channel: int
    credit: int


@dataclass(frozen=True)
class ChannelConnected:
    """An upstream subtask connected input channel `channel`."""

    attempt: int
    channel: int
    connection: Connection


@dataclass(frozen=True)
class InputChannelLost:
    """Input channel `channel` closed (its sender ended, failed or was cancelled)."""

    attempt: int
    channel: int


@dataclass(frozen=True)
class OutputChannelLost:
    """Output channel `channel` closed (its receiver failed or was cancelled)."""

    attempt: int
    channel: int


@dataclass(frozen=True)
class InputFailed:
    """Reading input channel `channel` failed with `error` (an undecodable frame)."""

    attempt: int
    channel: int
    error: Exception


@dataclass(frozen=True)
class OutputFailed:
    """Reading the credit of output channel `channel` failed with `error` (an unreadable
    credit frame, a bug): the channel is unusable and the task fails with the error."""

    attempt: int
    channel: int
    error: Exception


@dataclass(frozen=True)
class RpcReceived:
    """A message of the JobMaster; it carries its attempt."""

    message: Any

    @property
    def attempt(self) -> int | None:
        return getattr(self.message, "attempt", None)


@dataclass(frozen=True)
class RpcLost:
    """The connection to the JobMaster is gone (concerns every attempt)."""

    attempt: None = None


@dataclass(frozen=True)
class SnapshotFailed:
    """The uploader thread could not serialize a snapshot's state (a value that cannot be
    pickled): the task fails with `error`, as when it was serialized at the barrier."""

    attempt: int
    error: BaseException


@dataclass(frozen=True)
class RunAction:
    """An action handed to the mailbox thread (`MailboxExecutor.execute`)."""

    attempt: int
    action: Callable[[], None]
    description: str


Mail = (
    InputReceived
    | SnapshotFailed
    | CreditReceived
    | ChannelConnected
    | InputChannelLost
    | OutputChannelLost
    | InputFailed
    | OutputFailed
    | RpcReceived
    | RpcLost
    | RunAction
)
"""Any mail a task handles."""

Post = Callable[[Any], None]
"""Puts a mail into a task's mailbox (thread-safe)."""


class TaskMailboxExecutor:
    """The `MailboxExecutor` of one attempt: each action becomes a RunAction mail.

    Any thread may call `execute`; the action runs on the mailbox thread, in FIFO order
    with the other mails, and is refused if the task moved on to another attempt.
    """

    def __init__(self, post: Post, attempt: int) -> None:
        self._post = post
        self._attempt = attempt

    def execute(self, action: Callable[[], None], description: str) -> None:
        self._post(RunAction(self._attempt, action, description))
