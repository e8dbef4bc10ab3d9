"""Reading one checkpoint file: every read or decode error names the file.

The envelope decoder (`barrierflow/_envelope.py`) knows bytes, not where they came
from, and the filesystem raises bare `OSError`s. Every reader of a checkpoint or
savepoint file (the JobMaster's `_metadata`, a task's state files, the command
line) goes through `read_checkpoint_file`, so a damaged, truncated or unreadable
file is reported with its path:

- the file cannot be read (missing, a folder, no permission, a network error):
  `CheckpointStorageError("cannot read <path>: ...")`, the OSError chained;
- the bytes are not a sound envelope of the expected kind (truncated, flipped,
  another kind, a newer format): `StateRestoreError("<path>: ...")`.

Each such error also carries the file's URI as its `file` attribute (it survives pickling,
so the JobMaster learns from a task's failure which checkpoint is damaged).
"""

from __future__ import annotations

from typing import Any, TypeVar

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.errors import CheckpointStorageError, StateRestoreError

__all__ = ["file_error", "named_file", "read_checkpoint_file"]


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


def read_checkpoint_file(where: _fs.Location | str, kind: str) -> tuple[Any, memoryview]:
    """The (header, body) of the checkpoint file at `where`, an envelope of `kind`.

    `where` is a Location or a URI/path. Raises CheckpointStorageError when the file
    cannot be read and StateRestoreError when it is damaged, each naming the file.

    >>> read_checkpoint_file("/no/chk-1/_metadata", "checkpoint-metadata")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    barrierflow.errors.CheckpointStorageError: cannot read the 'checkpoint-metadata' file \
file:///no/chk-1/_metadata: ...
    """
    location = where if isinstance(where, _fs.Location) else _fs.location(where)
    try:
        data = _fs.read_bytes(location)
    except (OSError, ValueError) as error:  # pyarrow raises ValueError for a bad URI
        message = f"cannot read the {kind!r} file {location}: {error}"
        raise file_error(CheckpointStorageError(message), location) from error
    try:
        return envelope.decode(data, kind)
    except StateRestoreError as error:
        raise file_error(StateRestoreError(f"{location}: {error}"), location) from error
