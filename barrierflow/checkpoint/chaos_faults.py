"""Transient storage faults that `barrierflow chaos` injects into checkpoint reads and writes.

The kind `storage` checks that a job rides out what an S3 503 or an NFS hiccup does to its
checkpoints: a `_metadata` write that fails (the checkpoint aborts), and reads that fail a
few times while a checkpoint is restored (the retries with backoff of checkpoint/retry.py
absorb them). `TransientFaults` is a storage hook (`_fs.add_hook`): armed with a count per
operation kind, it raises that many transient OSErrors (EIO) at the next matching
operations of this process, then lets everything pass. The driver arms it for `_metadata`
(cluster/chaos_faults.py), a task for its state files while it restores (runtime/task.py).
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Callable

from barrierflow import _fs

__all__ = ["TransientFaults"]


class TransientFaults:
    """Raises armed transient faults at matching storage operations. Thread-safe.

    >>> faults = TransientFaults(lambda kind, loc: loc.name.endswith(".state"))
    >>> faults.arm("read", 1)
    >>> faults("read", _fs.Location("file:///c/chk-1/_metadata"))  # does not match: passes
    >>> faults("read", _fs.Location("file:///c/chk-1/1-0-a.state"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    OSError: [Errno 5] transient storage fault injected by barrierflow chaos: read of file:...
    >>> faults("read", _fs.Location("file:///c/chk-1/1-0-a.state"))  # used up: passes
    """

    def __init__(self, matches: Callable[[str, _fs.Location], bool]) -> None:
        self._matches = matches
        self._left: dict[str, int] = {}
        self._lock = threading.Lock()
        self._remove: Callable[[], None] | None = None

    def arm(self, kind: str, count: int) -> None:
        """Make the next `count` matching operations of `kind` (`read`, `write`, ... as
        `_fs` names them) fail, on top of any still armed."""
        with self._lock:
            self._left[kind] = self._left.get(kind, 0) + count

    def left(self, kind: str) -> int:
        """How many faults of `kind` are still to come."""
        with self._lock:
            return self._left.get(kind, 0)

    def install(self) -> None:
        """Start watching this process's storage operations (once; `uninstall` ends it)."""
        if self._remove is None:
            self._remove = _fs.add_hook(self)

    def uninstall(self) -> None:
        remove, self._remove = self._remove, None
        if remove is not None:
            remove()

    def __call__(self, kind: str, loc: _fs.Location) -> None:
        with self._lock:
            if self._left.get(kind, 0) <= 0 or not self._matches(kind, loc):
                return
            self._left[kind] -= 1
        raise OSError(
            errno.EIO, f"transient storage fault injected by barrierflow chaos: {kind} of {loc}"
        )
