"""SIGTERM and SIGINT on the driver: stop the job in order, then exit with one line.

While `env.execute()` waits for its job on the main thread, the first SIGTERM or SIGINT
(Ctrl-C) asks the job to cancel ("stopped by SIGTERM"): its tasks stop, its sinks are
cleaned up (cluster/jobmaster/sink_cleanup.py), its lease, sockets and log files close, and then
`execute` prints one line and exits with 128 + the signal's number (130 for SIGINT, 143
for SIGTERM), as a shell reports a process the signal ended. A second signal meanwhile
exits at once, saying the cleanup was cut short and that `barrierflow cleanup` resolves
what is left. The handlers that were there before are restored afterwards.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_status(signum: int) -> int:
    """The exit status of a driver stopped by `signum`: 128 + its number, as shells say.

    >>> exit_status(signal.SIGINT), exit_status(signal.SIGTERM)
    (130, 143)
    """
    return 128 + int(signum)


class StopOnSignals:
    """Installs the handlers for the block (on the main thread only; elsewhere Python allows
    none, and the block runs without them). `received` is the first signal, or None.

    Guarantees the previous handlers are back when the block ends, and that the first
    signal only requests the cancel (the caller's block goes on until the job ended)."""

    def __init__(
        self,
        job_name: str,
        cancel: Callable[[str], None],
        *,
        write: Callable[[str], Any] | None = None,
        exit_now: Callable[[int], Any] = os._exit,
    ) -> None:
        self.job_name = job_name
        self._cancel = cancel
        self._write = write or _write_stderr
        self._exit_now = exit_now
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.received is None:
            self.received = signum
            self._write(
                f"barrierflow: {name} received: stopping job '{self.job_name}' (its tasks, then "
                f"a cleanup of its sinks); {name} again exits at once\n"
            )
            self._cancel(f"stopped by {name}")
            return
        self._write(
            f"barrierflow: {name} again: exiting at once; the cleanup of job '{self.job_name}' "
            "was cut short: `barrierflow cleanup JOB_FILE` resolves what its sinks left "
            "(prepared transactions, staged files)\n"
        )
        self._exit_now(exit_status(self.received))

    def stopped_line(self, outcome: str) -> str:
        """The one line a stopped driver ends with; `outcome` is how the job ended."""
        assert self.received is not None
        name = signal.Signals(self.received).name
        return f"barrierflow: job '{self.job_name}' stopped by {name}: {outcome}\n"


def _write_stderr(text: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(text)
    sys.stderr.flush()
