"""A stream task in a child process, supervised by its Spark task, which respawns it in place.

The Spark task (the barrier stage's function on a PySpark worker) holds the one RPC
connection to the JobMaster and forks a child process that runs the stream task.
The child talks to the JobMaster through the parent: its messages go over a pipe and
the parent relays them both ways, so the JobMaster's connection lives exactly as
long as the Spark task. When the child dies (out of memory, a crashing native
library, a SIGKILL) while the parent lives, the parent reports `TaskProcessDied`
for the child's attempt; the JobMaster rolls the job back in place and the parent
starts a new child when RestartTask names the next attempt. Only the loss of the
parent itself (its worker, executor or host) closes the JobMaster's connection and
costs a new barrier stage.

Why fork: the worker has already imported barrierflow and holds the task's
descriptor, so a forked child runs at once (about 3 ms here, against 200-250 ms
for "spawn" or "forkserver", which import everything again). The child first
points every inherited descriptor but stdout, stderr and its pipe at /dev/null, so
it holds neither the worker's socket to Spark nor the JobMaster's connection (the
loss of either still shows when the parent dies), and on Linux it asks to be killed
when its parent dies. The parent's only other thread at a fork is the RPC reader,
blocked in `recv` and holding no lock the child uses; the child never returns into
the worker's code (it ends with `os._exit`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import queue
import signal
import socket
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.errors import BarrierflowError, StreamCorruptionError
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.deployment import TaskSettings
from barrierflow.runtime.mails import RpcLost, RpcReceived
from barrierflow.runtime.network.connections import close_connection

log = logging.getLogger(__name__)

POLL_S = 0.5
"""How long one wait on the supervisor's mailbox blocks."""
STOP_GRACE_S = 5.0
"""How long a child told to stop (its pipe closed) may take before it is killed."""
_PR_SET_PDEATHSIG = 1


class ParentLink:
    """The child's end of the pipe to its Spark task: what an RpcClient is to a task in the
    Spark task's own process (posts RpcReceived and RpcLost, thread-safe `send`)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def start(self, post: Callable[[Any], None]) -> None:
        """Read the JobMaster's messages (relayed by the parent) into `post`."""
        threading.Thread(target=self._read, args=(post,), name="parent-read", daemon=True).start()

    def send(self, message: Any) -> None:
        with self._lock:
            self._conn.send(message)

    def _read(self, post: Callable[[Any], None]) -> None:
        try:
            while True:
                post(RpcReceived(self._conn.recv()))
        except (EOFError, OSError, TypeError):
            post(RpcLost())


ChildBody = Callable[[TaskSettings, ParentLink], None]
"""What the child runs: (the attempt's settings, its link to the parent). Returning means
the stream task ended (finished, cancelled, or no next attempt came); raising, that it
failed without telling the JobMaster."""


@dataclass(frozen=True)
class ChildExited:
    """The supervisor's mail: child `pid` ended with wait status `status`."""

    pid: int
    status: int

    @property
    def clean(self) -> bool:
        return os.waitstatus_to_exitcode(self.status) == 0

    @property
    def how(self) -> str:
        """`was killed by SIGKILL` or `exited with code 1`."""
        code = os.waitstatus_to_exitcode(self.status)
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited with code {code}"


class ChildProcess:
    """One forked stream-task process and the parent's thread relaying what it sends."""

    def __init__(
        self,
        body: ChildBody,
        settings: TaskSettings,
        relay: Callable[[Any], None],
        post: Callable[[Any], None],
    ) -> None:
        parent_end, child_end = Pipe(duplex=True)
        parent_pid = os.getpid()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        with warnings.catch_warnings():  # Python 3.12+ warns of forking with threads (above)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: never returns
            _run_child(body, settings, child_end, parent_pid)
        child_end.close()
        self.pid = pid
        self._conn = parent_end
        self._relay = relay
        self._post = post
        threading.Thread(target=self._read, name=f"child-{pid}-read", daemon=True).start()

    def send(self, message: Any) -> bool:
        """Hand a JobMaster message to the child; False if the child is gone."""
        try:
            self._conn.send(message)
        except (OSError, ValueError):
            return False
        return True

    def close_link(self) -> None:
        """Close the pipe: the child sees the JobMaster as lost and ends its task."""
        close_connection(self._conn)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)

    def _read(self) -> None:
        """Relay the child's messages in order, then report its end (after its last message,
        so the JobMaster hears everything the child said before it died)."""
        try:
            while True:
                self._relay(self._conn.recv())
        except (EOFError, OSError, TypeError):
            pass
        except Exception as error:  # an unreadable message: the child is treated as dead
            log.warning("unreadable message from stream task process %d: %s", self.pid, error)
            self.kill()
        close_connection(self._conn)
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:  # reaped elsewhere: its status is unknown
            status = 1 << 8
        self._post(ChildExited(self.pid, status))


def _run_child(body: ChildBody, settings: TaskSettings, conn: Connection, parent: int) -> None:
    code = 1
    try:
        _die_with_parent(parent)
        _isolate(keep=conn.fileno())
        body(settings, ParentLink(conn))
        code = 0
    except BaseException as error:
        with contextlib.suppress(BaseException):
            log.warning("stream task process %d failed: %s", os.getpid(), error)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


def _die_with_parent(parent: int) -> None:
    """Linux: the kernel kills this process when its parent dies (a killed Spark task never
    leaves its stream task behind, even one busy in user code)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _isolate(keep: int) -> None:
    """Point every inherited descriptor but stdout, stderr and `keep` at /dev/null.

    Not closed: the parent's objects copied into this process still name those numbers,
    and closing one later must not close a socket this process opened since."""
    folder = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    devnull = os.open(os.devnull, os.O_RDWR)
    for name in os.listdir(folder):
        fd = int(name)
        if fd in (1, 2, keep, devnull):
            continue
        with contextlib.suppress(OSError):
            os.fstat(fd)  # still open (not the listing's own descriptor)
            os.dup2(devnull, fd)
    os.close(devnull)


class TaskSupervisor:
    """The Spark task's side: runs the stream task in a child and respawns it in place.

    Guarantees the JobMaster hears of a child's death only after everything the child
    sent, under the attempt the child ran (the highest RestartTask it was handed, or the
    first attempt), and that when `run` returns no child is left. Assumes `mailbox`
    receives the JobMaster connection's RpcReceived and RpcLost mails.
    """

    def __init__(
        self,
        settings: TaskSettings,
        partition: int,
        send_rpc: Callable[[Any], None],
        mailbox: queue.SimpleQueue,
        body: ChildBody,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.partition = partition
        self.mailbox = mailbox
        self.respawns = 0
        """Children started after the first one died."""
        self._send_rpc = send_rpc
        self._body = body
        self._clock = clock
        self._child: ChildProcess | None = None
        self._finished = False
        """The child reported TaskFinished: its death after that ends the Spark task."""
        self._next_attempt_by = 0.0
        """With no child (it died): when to give up waiting for the next attempt."""

    @property
    def attempt(self) -> int:
        return self.settings.attempt

    @property
    def child_pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def run(self) -> None:
        """Run the stream task until it ends, the JobMaster cancels it or is lost, or no next
        attempt comes in time after a death. Raises if the JobMaster cannot be told of one."""
        self._start_child()
        try:
            while True:
                try:
                    mail = self.mailbox.get(timeout=POLL_S)
                except queue.Empty:
                    mail = None
                if isinstance(mail, RpcLost):
                    return
                if isinstance(mail, ChildExited) and mail.pid == self.child_pid:
                    self._child = None
                    if mail.clean or self._finished:
                        return
                    self._report_death(mail)
                    self._next_attempt_by = self._clock.monotonic() + self._timeout_s
                elif isinstance(mail, RpcReceived) and not self._on_jobmaster(mail.message):
                    return
                if self._child is None and self._clock.monotonic() > self._next_attempt_by:
                    log.warning(
                        "the Spark task of partition %d waited %.0f s for the next attempt "
                        "after its stream task died; giving up",
                        self.partition,
                        self._timeout_s,
                    )
                    return
        finally:
            self._stop_child()

    @property
    def _timeout_s(self) -> float:
        return self.settings.connect_timeout_s

    def _on_jobmaster(self, message: Any) -> bool:
        """Pass `message` to the child; with no child, act on it. False: the Spark task ends."""
        if not isinstance(message, msg.JOBMASTER_TO_TASK):
            raise StreamCorruptionError(f"unknown message from the JobMaster: {message!r}")
        if isinstance(message, msg.RestartTask) and message.attempt > self.attempt:
            self.settings = message.settings
            if self._child is None:
                self._start_child()
                self.respawns += 1
                return True
        if self._child is not None:
            self._child.send(message)  # a child that just died: its ChildExited follows
        elif isinstance(message, msg.CancelTask) and message.attempt >= self.attempt:
            return False
        elif isinstance(message, msg.EndAttempt) and message.attempt == self.attempt:
            delay_s = message.restart_delay_ms / 1000
            self._next_attempt_by = self._clock.monotonic() + delay_s + self._timeout_s
        return True

    def _start_child(self) -> None:
        if self._child is not None:
            raise BarrierflowError("a stream task process is already running")
        self._finished = False
        self._child = ChildProcess(self._body, self.settings, self._relay, self.mailbox.put)

    def _relay(self, message: Any) -> None:
        """On the child's reader thread: pass a child's message on to the JobMaster."""
        try:
            self._send_rpc(message)
            if isinstance(message, msg.RegisterTask):
                self._send_rpc(
                    msg.SparkTaskProcess(
                        message.attempt, message.partition, socket.gethostname(), os.getpid()
                    )
                )
        except OSError:
            return  # the JobMaster is gone: its RpcLost ends the Spark task
        if isinstance(message, msg.TaskFinished):
            self._finished = True

    def _report_death(self, exited: ChildExited) -> None:
        log.info(
            "stream task of partition %d (pid %d) %s; telling the JobMaster",
            self.partition,
            exited.pid,
            exited.how,
        )
        try:
            self._send_rpc(
                msg.TaskProcessDied(self.attempt, self.partition, exited.pid, exited.how)
            )
        except OSError as error:
            raise BarrierflowError(
                f"the stream task process {exited.pid} {exited.how}, and the JobMaster "
                f"is unreachable: {error}"
            ) from error

    def _stop_child(self) -> None:
        """End the child: close its pipe (it cancels its task), kill it if it lingers, reap."""
        child, self._child = self._child, None
        if child is None:
            return
        child.close_link()
        for last_resort in (child.kill, None):
            deadline = self._clock.monotonic() + STOP_GRACE_S
            while (remaining := deadline - self._clock.monotonic()) > 0:
                try:
                    mail = self.mailbox.get(timeout=min(remaining, POLL_S))
                except queue.Empty:
                    continue
                if isinstance(mail, ChildExited) and mail.pid == child.pid:
                    return
            if last_resort is not None:
                last_resort()
        log.warning("stream task process %d did not end after SIGKILL", child.pid)
