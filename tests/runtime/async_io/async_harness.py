"""A hand-driven mailbox for async I/O tests: the test's thread plays the task's thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from barrierflow.runtime.elements import Watermark

MAIL_TIMEOUT_S = 10.0
"""How long a test waits for the next mail before it declares a hang."""


class Mailbox:
    """A test MailboxExecutor: actions handed over from any thread, run only when the test
    says so, on the test's thread (which plays the task's mailbox thread)."""

    def __init__(self) -> None:
        self._mails: queue.Queue[Callable[[], None]] = queue.Queue()
        self.owner = threading.current_thread()
        self.descriptions: list[str] = []

    def execute(self, action: Callable[[], None], description: str) -> None:
        """`MailboxExecutor.execute`: queue `action` for the test to run."""
        self.descriptions.append(description)
        self._mails.put(action)

    def run_one(self) -> None:
        """Run the next mail, waiting for it (what a task's loop does while it has no work)."""
        assert threading.current_thread() is self.owner
        try:
            mail = self._mails.get(timeout=MAIL_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError(f"no mail arrived within {MAIL_TIMEOUT_S} s") from None
        mail()

    def run_pending(self) -> int:
        """Run every mail already posted, without waiting; returns how many ran."""
        ran = 0
        while True:
            try:
                mail = self._mails.get_nowait()
            except queue.Empty:
                return ran
            mail()
            ran += 1

    def discard_pending(self) -> int:
        """Drop every mail already posted (what a task's rollback does); returns how many."""
        dropped = 0
        while True:
            try:
                self._mails.get_nowait()
            except queue.Empty:
                return dropped
            dropped += 1

    @property
    def pending(self) -> int:
        return self._mails.qsize()


class RecordingOutput:
    """Collects what an `AsyncWaitLogic` emits: ("r", result, timestamp) and watermarks."""

    def __init__(self) -> None:
        self.emitted: list[Any] = []

    def emit_results(self, results: tuple[Any, ...], timestamp: int | None) -> None:
        self.emitted.extend(("r", result, timestamp) for result in results)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.emitted.append(watermark)

    def pop_all(self) -> list[Any]:
        emitted, self.emitted = self.emitted, []
        return emitted
