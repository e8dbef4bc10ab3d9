"""Reading one checkpoint file: every read or decode error names the file and says whether
the file is damaged or the storage failed to answer.

The envelope decoder (`barrierflow/_envelope.py`) knows bytes, not where they came
from, and the filesystem raises bare `OSError`s. Every reader of a checkpoint or
savepoint file (the JobMaster's `_metadata`, a task's state files, the command
line) goes through `read_checkpoint_file`, so a damaged, truncated or unreadable
file is reported with its path, classified:

- damage, `StateRestoreError("<path>: ...")`: the bytes are not a sound envelope of the
  expected kind (a failed checksum, truncated, another kind, a newer format), or the
  file is missing (`FileNotFoundError`, locally and on S3). Waiting will not mend it:
  the restore falls back past that checkpoint (cluster/jobmaster/restore_point.py);
- a fault of the storage, `CheckpointStorageUnavailableError("cannot read ... now")`:
  any other OSError (an S3 503, a reset connection, a timeout, an NFS I/O error, a
  refused permission), once retries with backoff (checkpoint/retry.py) are used up. The
  file may well be sound: the attempt goes through the restart strategy, and the next
  one reads the same checkpoint again;
- a location that names no filesystem (pyarrow's ValueError for a bad URI):
  `CheckpointStorageError`, the error chained.

Each such error also carries the file's URI as its `file` attribute (it survives pickling,
so the JobMaster learns from a task's failure which checkpoint is damaged).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.checkpoint import retry
from barrierflow.checkpoint.retry import Backoff, retry_transient
from barrierflow.errors import (
    CheckpointStorageError,
    CheckpointStorageUnavailableError,
    StateRestoreError,
)

__all__ = ["file_error", "named_file", "read_checkpoint_file", "read_storage"]

T = TypeVar("T")


E = TypeVar("E", bound=BaseException)
"""An exception type."""


def file_error(error: E, location: _fs.Location | str) -> E:
    """`error`, marked as being about the checkpoint file at `location` (its `file`)."""
    error.file = location.uri if isinstance(location, _fs.Location) else location
    return error


def named_file(error: BaseException) -> str | None:
    """The URI of the checkpoint file `error` (or an error it was raised from) is about."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        file = getattr(current, "file", None)
        if isinstance(file, str):
            return file
        current = current.__cause__ or current.__context__
    return None


def read_storage(
    operation: Callable[[], T],
    location: _fs.Location,
    what: str,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`operation()`, a read of `location` (`what`: "the 'subtask-state' file"), with
    transient storage faults retried (checkpoint/retry.py) and every failure classified:
    StateRestoreError for a missing file (damage), CheckpointStorageUnavailableError for a
    fault that outlived the retries, CheckpointStorageError for a location no filesystem
    takes; each names the file and chains the error."""
    try:
        return retry_transient(operation, f"reading {what} {location}", backoff, sleep)
    except FileNotFoundError as error:
        message = f"cannot read {what} {location}: it is missing ({error})"
        raise file_error(StateRestoreError(message), location) from error
    except OSError as error:
        tries = (backoff or retry.DEFAULT_BACKOFF).attempts
        message = f"storage error reading {what} {location} ({tries} tries): {error}"
        raise file_error(CheckpointStorageUnavailableError(message), location) from error
    except ValueError as error:  # pyarrow raises ValueError for a bad URI
        message = f"cannot read {what} {location}: {error}"
        raise file_error(CheckpointStorageError(message), location) from error


def read_checkpoint_file(where: _fs.Location | str, kind: str) -> tuple[Any, memoryview]:
    """The (header, body) of the checkpoint file at `where`, an envelope of `kind`.

    `where` is a Location or a URI/path. Raises StateRestoreError when it is damaged or
    missing, CheckpointStorageUnavailableError when the storage keeps failing to answer,
    each naming the file (`read_storage`).

    >>> read_checkpoint_file("/no/chk-1/_metadata", "checkpoint-metadata")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.StateRestoreError: cannot read the 'checkpoint-metadata' file \
file:///no/chk-1/_metadata: it is missing (...)
    """
    location = where if isinstance(where, _fs.Location) else _fs.location(where)
    data = read_storage(lambda: _fs.read_bytes(location), location, f"the {kind!r} file")
    try:
        return envelope.decode(data, kind)
    except StateRestoreError as error:
        raise file_error(StateRestoreError(f"{location}: {error}"), location) from error
