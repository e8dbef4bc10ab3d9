"""A job's checkpoint lineage: the random id of its checkpoint folder.

Checkpoint ids never repeat within a job's folder (a restored job numbers above the
snapshot it restored, and above every folder and history entry), so (lineage, checkpoint
id) names one checkpoint uniquely across runs, storages and savepoint migrations: a job
moved to new storage, or whose folder was deleted, gets a new lineage and may reuse ids
another lineage used without any sink confusing the two. Sinks name their transactions
and committed files by both (`SinkContext.lineage`).

The id lives in `<job folder>/_lineage`: read if present, else created (a new folder, or
one deleted since). A folder from before lineages existed gets one on its next run; what
earlier runs committed carries no lineage and is never taken for this one's.
"""

from __future__ import annotations

import re
import secrets

from barrierflow import _fs
from barrierflow.errors import CheckpointStorageError

LINEAGE_FILE = "_lineage"
LINEAGE_HEX_CHARS = 16
_LINEAGE = re.compile(rf"^[0-9a-f]{{{LINEAGE_HEX_CHARS}}}$")


def job_lineage(job_dir: _fs.Location) -> str:
    """The lineage of the checkpoint folder `job_dir`, created if it has none yet.

    >>> import tempfile
    >>> folder = _fs.location(tempfile.mkdtemp())
    >>> first = job_lineage(folder)
    >>> job_lineage(folder) == first and len(first) == LINEAGE_HEX_CHARS
    True
    """
    target = job_dir.child(LINEAGE_FILE)
    try:
        if _fs.exists(target):
            text = _fs.read_bytes(target).decode("ascii", "replace").strip()
            if not _LINEAGE.match(text):
                raise CheckpointStorageError(
                    f"{target} does not hold a lineage id ({text[:40]!r}): delete the file "
                    "to give the folder a new lineage"
                )
            return text
        lineage = new_lineage()
        _fs.make_dirs(job_dir)
        _fs.write_atomic(target, (lineage + "\n").encode("ascii"))
        return lineage
    except OSError as error:
        raise CheckpointStorageError(f"cannot read or create {target}: {error}") from error


def new_lineage() -> str:
    """A fresh random lineage id (16 hex characters)."""
    return secrets.token_hex(LINEAGE_HEX_CHARS // 2)
