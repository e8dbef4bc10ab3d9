"""What a stream task prints reaches the driver's console, as a local PyFlink run shows it.

A task's standard output is its Spark worker's, which Spark sends to the executor's log (the
job's `spark.log` on a local master, the worker's log folder on a cluster), so `print()`
sinks (and a user function's own `print`) would be lost to the user. In a stream task's
process `sys.stdout` is a `ConsoleForwarder`: it keeps what is written in a small buffer and
sends whole lines, in order, as `TaskConsoleOutput` over the task's link to the JobMaster
(the path `TaskLogRecords` take), which writes them to the driver's `sys.stdout`
(`print_task_output`). Lines of one subtask keep their order; lines of different subtasks
interleave as they arrive, never inside a line.

Volume: a batch goes when FLUSH_S passed, when the buffer holds BATCH_CHARS, or when the
writer flushes (the print sink does at every checkpoint and when it closes). Memory stays
bounded by BATCH_CHARS: a writer faster than the link waits for its own send, so a flood of
prints is paced by the driver's console, as a Flink print sink is by its stdout. The output is
at-least-once: lines printed by an attempt that fails stay printed, and the records replayed
after the restore are printed again.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from barrierflow.runtime.task_messages import TaskConsoleOutput

__all__ = ["ConsoleForwarder", "forwarding_task_console", "print_task_output"]

BATCH_CHARS = 64 * 1024
"""A batch is sent as soon as this much text waits (and the writer waits for it)."""
FLUSH_S = 0.1
"""How often the forwarding thread sends the whole lines written since the last batch."""


class ConsoleForwarder(io.TextIOBase):
    """A text stream (the task process's `sys.stdout`) that sends what is written to the
    JobMaster through `send`. Any thread may write; sends are serialized, so batches leave in
    the order their text was written."""

    def __init__(
        self,
        partition: int,
        attempt: Callable[[], int],
        send: Callable[[Any], None],
        underlying: Any = None,
    ):
        super().__init__()
        self._underlying = underlying
        """The stream it stands for: its file descriptor is still the process's stdout."""
        self._partition = partition
        self._attempt = attempt
        self._send = send
        self._parts: list[str] = []
        self._size = 0
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        """The process's own stdout (a library asking for a descriptor writes past the
        forwarding, to the worker's log, as before)."""
        if self._underlying is None:
            raise io.UnsupportedOperation("fileno")
        return self._underlying.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if text:
            with self._lock:
                self._parts.append(text)
                self._size += len(text)
                if self._size >= BATCH_CHARS:
                    self._send_locked(whole_lines=False)
        return len(text)

    def flush(self) -> None:
        """Send everything written so far (a print sink flushes at checkpoints and at close)."""
        with self._lock:
            self._send_locked(whole_lines=False)

    def send_lines(self) -> None:
        """Send the whole lines written so far; a line still being written waits (print()
        writes a record and its newline in two calls)."""
        with self._lock:
            self._send_locked(whole_lines=True)

    def _send_locked(self, whole_lines: bool) -> None:
        if not self._parts:
            return
        text = "".join(self._parts)
        rest = ""
        if whole_lines:
            cut = text.rfind("\n") + 1
            text, rest = text[:cut], text[cut:]
        self._parts = [rest] if rest else []
        self._size = len(rest)
        if text:
            with contextlib.suppress(OSError, ValueError):  # the JobMaster is gone: so is the job
                self._send(TaskConsoleOutput(self._attempt(), self._partition, text))


@contextlib.contextmanager
def forwarding_task_console(
    partition: int, attempt: Callable[[], int], send: Callable[[Any], None]
) -> Iterator[ConsoleForwarder]:
    """For the block (a stream task's process): `sys.stdout` forwards to the driver's console,
    whole lines every FLUSH_S, everything at the end."""
    previous = sys.stdout
    forwarder = ConsoleForwarder(partition, attempt, send, previous)
    sys.stdout = forwarder
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(FLUSH_S):
            forwarder.send_lines()

    thread = threading.Thread(target=run, name="task-console", daemon=True)
    thread.start()
    try:
        yield forwarder
    finally:
        stop.set()
        thread.join(FLUSH_S * 10)
        forwarder.flush()
        sys.stdout = previous


def print_task_output(message: TaskConsoleOutput) -> None:
    """On the driver (JobMaster thread): the task's lines on the console, as they are."""
    out = sys.stdout  # looked up now: `barrierflow run`'s live panel may have replaced it
    if out is None:
        return
    with contextlib.suppress(OSError, ValueError):  # a closed or broken console loses them
        out.write(message.text)
        out.flush()
