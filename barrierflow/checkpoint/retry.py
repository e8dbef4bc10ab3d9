"""Retrying a storage call that failed for a moment, with exponential backoff.

Checkpoint storage fails now and then without anything being wrong with the files: an
S3 503 SlowDown, a reset connection, a timeout, an NFS I/O error. Such a fault is worth a
few more tries a little later, within seconds, before the caller gives up and the attempt
goes through the restart strategy. A missing file is no such fault (it will not appear
by waiting): it is never retried. Pure but for the injected `sleep`, so the schedule is
tested event by event with a fake clock; the JobMaster (the `_metadata` it restores, the
state files it checks) and the tasks (the state files they read) share it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["DEFAULT_BACKOFF", "Backoff", "is_transient", "retry_transient"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """How often and how long to wait between tries: `attempts` tries in all, the waits
    growing from `first_delay_s` by `multiplier` up to `max_delay_s`.

    >>> Backoff(attempts=5, first_delay_s=0.2, multiplier=2, max_delay_s=1).delays()
    [0.2, 0.4, 0.8, 1]
    """

    attempts: int = 5
    first_delay_s: float = 0.2
    multiplier: float = 2.0
    max_delay_s: float = 1.6

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"a backoff needs at least one attempt, got {self.attempts}")

    def delays(self) -> list[float]:
        """The waits between consecutive tries (one fewer than `attempts`)."""
        waits, delay = [], self.first_delay_s
        for _ in range(self.attempts - 1):
            waits.append(min(delay, self.max_delay_s))
            delay *= self.multiplier
        return waits


DEFAULT_BACKOFF = Backoff()
"""5 tries over about 3 s (waits of 0.2, 0.4, 0.8 and 1.6 s)."""


def is_transient(error: BaseException) -> bool:
    """Whether `error` is a storage fault worth another try: an OSError other than a missing
    file (pyarrow reports a missing file or object as FileNotFoundError, locally and on
    S3), such as an S3 503, a reset connection, a timeout or an I/O error.

    >>> is_transient(OSError("When reading information for key 'x': AWS Error SLOW_DOWN"))
    True
    >>> is_transient(FileNotFoundError("no such file")), is_transient(ValueError("bad URI"))
    (False, False)
    """
    return isinstance(error, OSError) and not isinstance(error, FileNotFoundError)


def retry_transient(
    operation: Callable[[], T],
    what: str,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`operation()`, tried again after each transient OSError (`is_transient`) as
    `backoff` (default `DEFAULT_BACKOFF`, read at each call) says. The last transient
    error, or the first other one, propagates: the caller says what it means. `what`
    names the call in the log line of each retry."""
    for wait in (backoff or DEFAULT_BACKOFF).delays():
        try:
            return operation()
        except OSError as error:
            if not is_transient(error):
                raise
            log.warning("%s failed (%s); trying again in %.1f s", what, error, wait)
        sleep(wait)
    return operation()
