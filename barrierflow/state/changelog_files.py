"""The files of changelog chains in a job's `shared/` folder, for the keyed state's chains
(`heap_changelog.py`) and the timers' (`runtime/timers/changelog.py`): a new file uploaded,
a manifest's files listed with their names checked, a file read back as long as its
manifest says."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from barrierflow import _fs
from barrierflow.errors import StateRestoreError


def upload_shared(shared: _fs.Location, suffix: str, parts: list[bytes]) -> tuple[str, int]:
    """Write `parts` as a new file `<uuid>.<suffix>` in the job's `shared` folder: its name
    relative to the job folder and its size. OSError: the file is deleted (best effort)
    and the error propagates."""
    target = shared.child(f"{uuid.uuid4().hex}.{suffix}")
    _fs.make_dirs(shared)
    try:
        _fs.write_parts(target, parts)
    except OSError:
        with contextlib.suppress(OSError):
            _fs.delete_file(target)
        raise
    return f"{shared.name}/{target.name}", sum(len(part) for part in parts)


def chain_files(header: dict[str, Any], what: str) -> list[tuple[str, int]]:
    """A manifest's base and deltas as (name, size), oldest first, each name a path inside
    the job folder (StateRestoreError naming the `what` manifest otherwise; KeyError,
    TypeError or ValueError for a malformed header)."""
    files = []
    for name, size in [header["base"], *header["deltas"]]:
        if (
            not isinstance(name, str)
            or name.startswith("/")
            or any(part in ("", ".", "..") for part in name.split("/"))
            or int(size) < 0
        ):
            raise StateRestoreError(f"a {what} manifest names the file {name!r}")
        files.append((name, int(size)))
    return files


def read_chain_file(
    base: _fs.Location, name: str, size: int, what: str
) -> tuple[bytes, _fs.Location]:
    """Chain file `name` (relative to the job folder of the checkpoint folder `base`), as
    long as its manifest says (StateRestoreError naming it otherwise), and where it lies."""
    location = base.parent.child(*name.split("/"))
    try:
        data = _fs.read_bytes(location)
    except OSError as error:
        raise StateRestoreError(f"{what} file {location} cannot be read: {error}") from error
    if len(data) != size:
        raise StateRestoreError(
            f"{what} file {location} has {len(data)} bytes, the manifest says {size}"
        )
    return data, location
