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
"""

from __future__ import annotations

from typing import Any

from barrierflow import _envelope as envelope
from barrierflow import _fs
from barrierflow.errors import CheckpointStorageError, StateRestoreError

__all__ = ["read_checkpoint_file"]


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
        raise CheckpointStorageError(
            f"cannot read the {kind!r} file {location}: {error}"
        ) from error
    try:
        return envelope.decode(data, kind)
    except StateRestoreError as error:
        raise StateRestoreError(f"{location}: {error}") from error
