"""Bounded waits: on a condition polled, or on a call that might block for ever.

A test waits on a state, never on a sleep; `BOUND_S` is how long it waits for something
that happens at once when the code is right, so a bug shows as a failed assert, not a hang.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

BOUND_S = 5.0
"""How long a test waits for something that happens at once when the code is right."""


def wait_for(condition: Callable[[], Any], timeout: float = BOUND_S) -> bool:
    """Poll `condition` until it holds or `timeout` passes; whether it held."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def run_bounded(action: Callable[[], Any], timeout: float = BOUND_S) -> Any:
    """`action()` on a helper thread; its result or exception, or AssertionError if it hangs."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, action()))
        except BaseException as error:  # handed to the test thread
            outcome.append((False, error))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert outcome, f"still blocked after {timeout} s"
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
