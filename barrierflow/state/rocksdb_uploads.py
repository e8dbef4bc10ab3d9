"""Incremental checkpoints of the on-disk backend: which local SST files are already in the
job's `shared/` folder, and which a checkpoint may reference instead of uploading.

RocksDB never changes an SST file once written, so within one database a file's local
name and size identify its content: a checkpoint uploads into `<job folder>/shared/` (under
a fresh `<uuid4 hex>.sst` name, never colliding across subtasks, attempts or runs) only the
SST files no usable earlier checkpoint uploaded, and names the others. MANIFEST, CURRENT,
OPTIONS and other small files stay private to the checkpoint (its side-files folder).

Reuse follows Flink's rule (`RocksIncrementalSnapshotStrategy`): a checkpoint references
only files of the LAST COMPLETED checkpoint this backend was told of
(`notify_checkpoint_complete`), or, before any completed, the files a restore downloaded
from the `shared/` folder of the same job folder. A checkpoint still in flight, or one that
aborted (the backend is not told of aborts; it simply never completes), lends nothing, and
a checkpoint written into another job folder than the baseline's reuses nothing (the first
checkpoint after a restore from another job folder uploads everything). Limiting reuse to
the last completed checkpoint, rather than every completed one, keeps every reference to
files the driver still retains: it keeps at least the last completed checkpoint. As the
news of a completion may reach the task after the next barrier, a checkpoint written
since the baseline and still pending may complete first and subsume it; a file is
therefore referenced only if every such pending checkpoint referenced it by the same name
(else uploaded anew), so whichever of them completes still references it.

A checkpoint's manifest (the native header, `rocksdb_backend.py`) gets an optional field

    "shared": [[local name, name relative to the job folder, size, crc32], ...]

resolved against the parent of the checkpoint's folder (`shared_sources`), so a checkpoint
restored from another job folder still finds its files. Manifests without it (full
uploads, and every one written before incremental checkpoints) read as before.

`SharedUploads` is the bookkeeping, pure (no files, no clocks) and safe to call from the
uploader thread (`plan`, `written`) and the mailbox thread (`complete`, `restored`);
`upload_incremental` does a checkpoint's uploads with it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow.errors import StateRestoreError

LocalFile = tuple[str, int]
"""A database file as (local name, size): its identity within one database."""


@dataclass(frozen=True)
class SharedFile:
    """A file in the job's shared folder: name relative to the job folder, size, CRC-32."""

    name: str
    size: int
    crc: int


@dataclass(frozen=True)
class UploadPlan:
    """What one checkpoint does with its SST files."""

    reuse: dict[LocalFile, SharedFile]
    """Files already in the shared folder, referenced by name."""
    upload: list[LocalFile]
    """Files to upload into the shared folder."""


def folder_key(shared: _fs.Location) -> str:
    """A shared folder's identity (the same folder spelled with or without a final `/`)."""
    return shared.without_trailing_slash().uri


def is_shareable(name: str) -> bool:
    """Whether a database file goes to the shared folder (SST files; all else is private)."""
    return name.endswith(".sst")


class SharedUploads:
    """The uploads of one database (one backend), and what the next checkpoint may reuse.

    >>> uploads = SharedUploads()
    >>> uploads.plan("job/shared", [("1.sst", 10)]).upload
    [('1.sst', 10)]
    >>> uploads.written(1, "job/shared", {("1.sst", 10): SharedFile("shared/a.sst", 10, 7)})
    >>> uploads.plan("job/shared", [("1.sst", 10)]).upload  # checkpoint 1 not complete yet
    [('1.sst', 10)]
    >>> uploads.complete(1)
    >>> plan = uploads.plan("job/shared", [("1.sst", 10), ("2.sst", 5)])
    >>> plan.reuse, plan.upload
    ({('1.sst', 10): SharedFile(name='shared/a.sst', size=10, crc=7)}, [('2.sst', 5)])
    >>> uploads.plan("other/shared", [("1.sst", 10)]).upload  # another job folder
    [('1.sst', 10)]
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._folder: str | None = None
        """The shared folder the baseline's files are in (None: no baseline)."""
        self._baseline: dict[LocalFile, SharedFile] = {}
        """The files of the last completed checkpoint (or of the restore): reusable."""
        self._baseline_id = -1
        """The id of that checkpoint (-1: none, or a restore)."""
        self._pending: dict[int, tuple[str, dict[LocalFile, SharedFile]]] = {}
        """Checkpoint id -> (shared folder, files it references): written, not complete."""

    def restored(self, folder: str, files: dict[LocalFile, SharedFile]) -> None:
        """The database was replaced by a restored one whose files `files` came from the
        shared folder `folder`: they are the baseline; everything known before is void."""
        with self._lock:
            self._folder = folder if files else None
            self._baseline = dict(files)
            self._baseline_id = -1
            self._pending.clear()

    def plan(self, folder: str, files: Iterable[LocalFile]) -> UploadPlan:
        """For a checkpoint into the shared folder `folder` of a database holding the SST
        files `files`: which to reference and which to upload. A file is referenced if the
        baseline (same folder) has it and every checkpoint written since, still pending,
        referenced it by the same name: the driver may subsume the baseline as soon as one
        of those completes (this backend may hear of it only after this barrier), and then
        keeps the baseline's files only if that checkpoint references them too."""
        with self._lock:
            baseline = self._baseline if folder == self._folder else {}
            newer = [files for _, files in self._pending.values()]
            reuse: dict[LocalFile, SharedFile] = {}
            upload: list[LocalFile] = []
            for local in files:
                found = baseline.get(local)
                if found is None or any(pending.get(local) != found for pending in newer):
                    upload.append(local)
                else:
                    reuse[local] = found
            return UploadPlan(reuse, upload)

    def written(
        self, checkpoint_id: int | None, folder: str, files: dict[LocalFile, SharedFile]
    ) -> None:
        """Checkpoint `checkpoint_id` references `files` in `folder` (reused or uploaded);
        they become reusable when it completes. None (a snapshot taken without an id):
        never reusable."""
        if checkpoint_id is None:
            return
        with self._lock:
            if checkpoint_id > self._baseline_id:
                self._pending[checkpoint_id] = (folder, dict(files))

    def complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` completed: if this database wrote it and it is newer
        than the baseline, its files are the baseline and older pending ones are forgotten
        (the driver retains it, or a newer one). Any other id (a savepoint, a checkpoint
        written before a restore) changes nothing: a pending checkpoint may still complete
        after a savepoint and subsume the baseline, so it keeps blocking (`plan`)."""
        with self._lock:
            found = self._pending.get(checkpoint_id)
            if found is None or checkpoint_id <= self._baseline_id:
                return
            self._folder, self._baseline = found
            self._baseline_id = checkpoint_id
            for pending in [i for i in self._pending if i <= checkpoint_id]:
                del self._pending[pending]


def upload_incremental(
    local_dir: str,
    names: list[str],
    shared: _fs.Location,
    uploads: SharedUploads,
    checkpoint_id: int | None,
) -> tuple[list[list[Any]], list[tuple[str, int, bool]], list[str]]:
    """Upload the SST files among `names` (in `local_dir`, a native checkpoint) that the
    baseline lacks into `shared`, and record the checkpoint in `uploads`.

    Returns the manifest's "shared" field, the checkpoint's `shared_files()` (name relative
    to the job folder, size, uploaded now) and the names left for the private side files.
    On an OSError the files this call uploaded are deleted (best effort) before it
    propagates; any left are unreferenced and swept by the driver.
    """
    sst = [name for name in names if is_shareable(name)]
    local = [(name, os.path.getsize(os.path.join(local_dir, name))) for name in sst]
    folder = folder_key(shared)
    plan = uploads.plan(folder, local)
    referenced = dict(plan.reuse)
    new: set[str] = set()
    if plan.upload:
        _fs.make_dirs(shared)
    try:
        for name, _ in plan.upload:
            target = shared.child(f"{uuid.uuid4().hex}.sst")
            size, crc = _fs.upload_file(os.path.join(local_dir, name), target)
            referenced[(name, size)] = SharedFile(f"{shared.name}/{target.name}", size, crc)
            new.add(target.name)
    except OSError:
        for created in new:
            with contextlib.suppress(OSError):
                _fs.delete_file(shared.child(created))
        raise
    uploads.written(checkpoint_id, folder, referenced)
    manifest = [
        [name, file.name, file.size, file.crc] for (name, _), file in sorted(referenced.items())
    ]
    listed = [
        (file.name, file.size, file.name.rsplit("/", 1)[-1] in new)
        for _, file in sorted(referenced.items())
    ]
    return manifest, listed, [name for name in names if not is_shareable(name)]


def shared_entries(header: dict[str, Any]) -> list[tuple[str, str, int, int]]:
    """A manifest's shared files as (local name, name relative to the job folder, size,
    crc32), checked: StateRestoreError for a malformed entry or a name leaving its folder."""
    try:
        entries = [
            (str(local), str(name), int(size), int(crc))
            for local, name, size, crc in header.get("shared", [])
        ]
    except (TypeError, ValueError) as error:
        raise StateRestoreError(f"malformed RocksDB checkpoint header: {error!r}") from error
    for local, name, _, _ in entries:
        if (
            "/" in local
            or local in ("", ".", "..")
            or name.startswith("/")
            or any(part in ("", ".", "..") for part in name.split("/"))
        ):
            raise StateRestoreError(f"a RocksDB checkpoint names the shared file {name!r}")
    return entries


def shared_sources(
    header: dict[str, Any], base: _fs.Location
) -> list[tuple[_fs.Location, str, int, int]]:
    """The shared files a manifest names, as (source, local name, size, crc32): names
    resolve against the job folder of the checkpoint folder `base` (its parent)."""
    return [
        (base.parent.child(*name.split("/")), local, size, crc)
        for local, name, size, crc in shared_entries(header)
    ]


def restored_files(
    header: dict[str, Any], base: _fs.Location
) -> tuple[str, dict[LocalFile, SharedFile]]:
    """The shared folder and the shared files a restore from `header` (checkpoint folder
    `base`) downloaded, by local identity: the baseline of a database adopted from it."""
    files = {
        (local, size): SharedFile(name, size, crc)
        for local, name, size, crc in shared_entries(header)
        if name.startswith("shared/")
    }
    return folder_key(base.parent.child("shared")), files
