"""Filesystem checkpoint storage: one folder per checkpoint, `_metadata` written last.

Layout: `<storage>/<job name>/chk-<n>/` holds the subtasks' state files and,
once the checkpoint is complete, `_metadata`, written atomically after them: its
presence is the commit. A folder without `_metadata` is an incomplete checkpoint and
is never restored. Checkpoint ids never repeat in a job's folder, so each `_metadata`
goes under a name no earlier commit used, which keeps the protocol sound on object
stores too (one upload, no rename: `_fs.write_atomic`). Savepoints
live in the same folders, marked in their `_metadata`; retention never deletes
them. Every read error names the file (`checkpoint/files.py`).

Incremental checkpoints also reference files in `<storage>/<job name>/shared/`, counted by
the shared-state registry (`shared_state_registry.py`, `self.shared`): `open_shared_state`
rebuilds it from the completed checkpoints and sweeps `shared/` at driver start, before any
task deploys; retention releases what it deletes and deletes the files nobody needs.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from barrierflow import _envelope as state_format
from barrierflow import _fs
from barrierflow.checkpoint.files import file_error, read_checkpoint_file, read_storage
from barrierflow.checkpoint.metadata import is_savepoint, shared_file_location, shared_files
from barrierflow.checkpoint.retry import retry_transient
from barrierflow.checkpoint.shared_state_registry import SharedStateRegistry
from barrierflow.errors import CheckpointStorageError, StateRestoreError

log = logging.getLogger(__name__)

METADATA = "_metadata"
METADATA_KIND = "checkpoint-metadata"
_CHK = re.compile(r"^chk-(\d+)$")


def job_folder_name(job_name: str) -> str:
    """A file-system-safe folder name for a job (the same job name finds its checkpoints)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", job_name).strip("._") or "job"


class FileSystemCheckpointStorage:
    """Checkpoint folders of one job on a pyarrow filesystem. JobMaster and tasks share it."""

    def __init__(self, storage: str, job_name: str) -> None:
        self.root = _fs.location(storage)
        self.job_dir = self.root.child(job_folder_name(job_name))
        self.protected: set[int] = set()
        """Checkpoints retention never deletes: one a job restored from in no-claim mode."""
        self._leftovers: dict[str, _fs.Location] = {}
        """Folders a discard could not delete (by URI), tried again by each `retain`."""
        self.shared = SharedStateRegistry()
        """Shared files of the retained checkpoints (incremental checkpoints)."""
        self._shared_leftovers: set[str] = set()
        self.shared_complete = False
        """The registry knows every completed checkpoint's shared files (`open_shared_state`
        read them all): only then may `sweep_shared` delete what it does not know."""
        """Shared files a delete failed on, tried again by each `retain` if still unneeded."""

    def prepare(self) -> None:
        """Create the folder and prove it is writable, before any task starts; on a local
        disk it is its owner's only (0700: the job's state is in it)."""
        make_writable_dir(self.job_dir, "checkpoint folder")
        _fs.keep_private(self.job_dir)

    def checkpoint_dir(self, checkpoint_id: int) -> _fs.Location:
        return self.job_dir.child(f"chk-{checkpoint_id}")

    def _checkpoint_ids(self) -> list[int]:
        """Ids of the `chk-*` folders, ascending. Storage faults are retried, then raise
        CheckpointStorageUnavailableError (checkpoint/files.py)."""
        names = read_storage(lambda: _fs.list_dir(self.job_dir), self.job_dir, "the folder")
        return sorted(int(m.group(1)) for name in names if (m := _CHK.match(name)))

    def completed_checkpoint_ids(self) -> list[int]:
        """Ids of the folders holding `_metadata`, ascending."""
        ids = self._checkpoint_ids()
        return [n for n in ids if self._holds_metadata(n)]

    def _holds_metadata(self, checkpoint_id: int) -> bool:
        target = self.checkpoint_dir(checkpoint_id).child(METADATA)
        return read_storage(lambda: _fs.exists(target), target, "the file")

    def incomplete_checkpoint_ids(self) -> list[int]:
        """Ids of the folders without `_metadata` (never completed, or their `_metadata` was
        lost), ascending."""
        completed = set(self.completed_checkpoint_ids())
        return [n for n in self._checkpoint_ids() if n not in completed]

    def next_checkpoint_id(self) -> int:
        """Above every folder ever created, so a zombie's late files never mix with new ones."""
        ids = self._checkpoint_ids()
        return ids[-1] + 1 if ids else 1

    def write_metadata(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        """Commit a checkpoint: `_metadata` written atomically and made durable, with the
        folder's own entry in the job folder (its state files were made durable by the
        tasks before they acknowledged). Raises CheckpointStorageError: the checkpoint
        fails, the job goes on (the checkpoint failure manager's tolerance decides)."""
        target = self.checkpoint_dir(checkpoint_id).child(METADATA)
        try:
            _fs.make_dirs(self.checkpoint_dir(checkpoint_id))
            _fs.write_atomic(target, state_format.encode(METADATA_KIND, metadata))
            _fs.sync_dir(self.job_dir)
        except OSError as error:
            raise CheckpointStorageError(f"cannot write {target}: {error}") from error

    def load_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        """The `_metadata` of a checkpoint. Raises StateRestoreError (damaged or missing) or
        CheckpointStorageUnavailableError (the storage kept failing), each naming the file."""
        return load_metadata(self.checkpoint_dir(checkpoint_id))

    def is_savepoint(self, checkpoint_id: int) -> bool:
        """Whether the completed checkpoint `checkpoint_id` is a savepoint (reads `_metadata`)."""
        return is_savepoint(self.load_metadata(checkpoint_id))

    def latest_completed(self) -> tuple[int, dict[str, Any]] | None:
        ids = self.completed_checkpoint_ids()
        return (ids[-1], self.load_metadata(ids[-1])) if ids else None

    def discard(self, checkpoint_id: int) -> None:
        """Delete a checkpoint's folder, then the shared files only it needed."""
        _fs.delete_dir(self.checkpoint_dir(checkpoint_id))
        self.delete_shared(self.shared.release(checkpoint_id))

    # ---- shared files of incremental checkpoints ---------------------------------------------

    @property
    def shared_dir(self) -> _fs.Location:
        return self.job_dir.child("shared")

    def open_shared_state(self) -> None:
        """At driver start, before any task deploys: rebuild the registry from every
        completed checkpoint's `_metadata`, then delete the files of `shared/` none of them
        references (left by aborted checkpoints, killed tasks, failed deletes). Nothing is
        read when `shared/` is empty (no incremental checkpoint). If a `_metadata` cannot be
        read the sweep is skipped (its files might be needed). Raises
        CheckpointStorageError only when a folder cannot be listed."""
        names = read_storage(lambda: _fs.list_dir(self.shared_dir), self.shared_dir, "the folder")
        if not names:
            self.shared_complete = True  # no checkpoint can need a file that is not there
            return
        registry, unreadable = SharedStateRegistry(), []
        for n in self.completed_checkpoint_ids():
            try:
                registry.register(n, [name for name, _ in shared_files(self.load_metadata(n))])
            except (CheckpointStorageError, StateRestoreError) as error:
                unreadable.append(f"{self.checkpoint_dir(n)} ({error})")
        registry.keep(self.shared.kept)  # what a restore kept before this call
        self.shared = registry
        if unreadable:
            log.warning("not sweeping %s: cannot read %s", self.shared_dir, "; ".join(unreadable))
            return
        self.shared_complete = True
        self._sweep(names)

    def sweep_shared(self) -> None:
        """Delete the files of `shared/` no retained checkpoint references: at the job's end,
        when no checkpoint of this run can complete any more (an upload still in flight then
        belongs to one that never will). Only once `open_shared_state` read every completed
        checkpoint. Raises CheckpointStorageError when `shared/` cannot be listed."""
        if self.shared_complete:
            names = read_storage(
                lambda: _fs.list_dir(self.shared_dir), self.shared_dir, "the folder"
            )
            self._sweep(names)

    def _sweep(self, names: list[str]) -> None:
        unneeded = self.shared.unreferenced(f"shared/{name}" for name in names)
        if unneeded:
            log.info("deleting %d shared file(s) of %s no checkpoint references",
                     len(unneeded), self.shared_dir)  # fmt: skip
        self.delete_shared(unneeded)

    def register_completed(self, checkpoint_id: int, metadata: dict[str, Any]) -> None:
        """A checkpoint completed: count the shared files it references."""
        self.shared.register(checkpoint_id, [name for name, _ in shared_files(metadata)])

    def discard_new_shared(self, names: list[str]) -> None:
        """An aborted checkpoint's new shared files: delete those no retained checkpoint
        references. Never raises."""
        self.delete_shared(self.shared.unreferenced(names))

    def delete_shared(self, names: list[str]) -> None:
        """Delete shared files by name relative to the job folder (only plain files of
        `shared/`), with transient faults retried; a failure is logged and the file tried
        again by the next `retain` (or swept at the next start). Never raises."""
        for name in names:
            parts = name.split("/")
            if len(parts) != 2 or parts[0] != "shared" or parts[1] in ("", ".", ".."):
                log.warning("not deleting %r: not a file of %s", name, self.shared_dir)
                continue
            target = self.job_dir.child(*parts)
            try:
                retry_transient(lambda t=target: _fs.delete_file(t), f"deleting {target}")
            except (OSError, ValueError) as error:
                log.warning("cannot delete the shared file %s now (tried again after the next "
                            "checkpoint): %s", target, error)  # fmt: skip
                self._shared_leftovers.add(name)
                continue
            self._shared_leftovers.discard(name)

    def release_restored(self, folder: _fs.Location, metadata: dict[str, Any]) -> None:
        """A restored checkpoint claimed by the job (claim mode) is subsumed: delete its
        folder and the shared files it referenced that nothing here needs. Raises OSError."""
        checkpoint_id = metadata.get("checkpoint_id")
        if isinstance(checkpoint_id, int) and folder.uri == self.checkpoint_dir(checkpoint_id).uri:
            self.discard(checkpoint_id)  # one of the job's own: the registry decides
            return
        _fs.delete_dir(folder)
        for name, _ in shared_files(metadata):  # another job folder's: its files go with it
            target = shared_file_location(folder, name)
            if target.uri.startswith(self.job_dir.uri + "/") and self.shared.is_referenced(name):
                continue
            retry_transient(lambda t=target: _fs.delete_file(t), f"deleting {target}")

    def discard_folder(self, folder: _fs.Location) -> bool:
        """Delete the folder of an aborted checkpoint or savepoint. A storage error is
        logged and the folder remembered: each `retain` tries it again. Never raises."""
        try:
            _fs.delete_dir(folder)
        except (OSError, ValueError) as error:
            log.warning("cannot delete %s now (tried again after the next checkpoint): %s",
                        folder, error)  # fmt: skip
            self._leftovers[folder.uri] = folder
            return False
        self._leftovers.pop(folder.uri, None)
        return True

    def discard_all(self) -> None:
        """Delete every `chk-*` folder of the job (retention DELETE_ON_CANCELLATION) but the
        protected ones (a folder restored in no-claim mode is never the job's to delete);
        savepoints live elsewhere. Raises CheckpointStorageError or OSError."""
        for n in self._checkpoint_ids():
            if n not in self.protected:
                self.discard(n)
        names = read_storage(lambda: _fs.list_dir(self.shared_dir), self.shared_dir, "the folder")
        self.delete_shared(self.shared.unreferenced(f"shared/{name}" for name in names))

    def retain(self, count: int) -> list[int]:
        """Keep the newest `count` completed checkpoints; delete older and abandoned folders.

        Savepoints are never deleted and do not count among the `count` (they belong to
        the user, as in Flink). A completed folder whose `_metadata` cannot be read is
        kept too: it might be a savepoint. Folders newer than the newest completed one
        may still be in flight and are left alone. A folder that cannot be deleted now
        is left for the next call (which finds it again); raises CheckpointStorageError
        only when the folder cannot be listed.
        """
        for folder in list(self._leftovers.values()):
            self.discard_folder(folder)
        self.delete_shared(self.shared.unreferenced(self._shared_leftovers))
        completed = self.completed_checkpoint_ids()
        checkpoints, kept = [], set()
        for n in completed:
            try:
                savepoint = self.is_savepoint(n)
            except (CheckpointStorageError, StateRestoreError) as error:
                log.warning("retention keeps %s: %s", self.checkpoint_dir(n), error)
                savepoint = True
            if savepoint:
                kept.add(n)
            else:
                checkpoints.append(n)
        kept.update(checkpoints[-count:])
        kept.update(self.protected)
        newest = completed[-1] if completed else 0
        removed = []
        for n in self._checkpoint_ids():
            if n < newest and n not in kept:
                try:
                    self.discard(n)
                except OSError as error:
                    log.warning("retention cannot delete %s now (retried after the next "
                                "checkpoint): %s", self.checkpoint_dir(n), error)  # fmt: skip
                    continue
                removed.append(n)
        return removed


def make_writable_dir(folder: _fs.Location, what: str) -> None:
    """Create `folder` and prove it is writable with a probe file; raises
    CheckpointStorageError "`what` `folder` is not writable: ..." if it is not."""
    probe = folder.child(f".probe-{uuid.uuid4().hex}")
    try:
        _fs.make_dirs(folder)
        _fs.write_bytes(probe, b"")
        _fs.delete_file(probe)
    except OSError as error:
        raise CheckpointStorageError(f"{what} {folder} is not writable: {error}") from error


def load_metadata(folder: _fs.Location) -> dict[str, Any]:
    """The `_metadata` of the checkpoint or savepoint in `folder`. Raises StateRestoreError
    (damaged or missing) or CheckpointStorageUnavailableError (the storage kept failing),
    each naming the file."""
    target = folder.child(METADATA)
    header, _ = read_checkpoint_file(target, METADATA_KIND)
    if not isinstance(header, dict):
        error = StateRestoreError(f"{target}: the metadata is not a map but {type(header)}")
        raise file_error(error, target)
    return header


def restore_folder(path: str) -> _fs.Location:
    """The folder of a savepoint or checkpoint given as the folder or its `_metadata` file,
    a local path or a URI (what `flink run -s` accepts).

    >>> restore_folder("/data/savepoints/savepoint-ab12cd-0123456789ab/_metadata").uri
    'file:///data/savepoints/savepoint-ab12cd-0123456789ab'
    >>> restore_folder("s3://bucket/chk/job/chk-7/").uri
    's3://bucket/chk/job/chk-7'
    >>> restore_folder("s3://bucket/chk/job/chk-7/_metadata?scheme=http").uri
    's3://bucket/chk/job/chk-7?scheme=http'
    """
    where = _fs.location(path).without_trailing_slash()
    return where.parent if where.name == METADATA else where


def check_files(folder: _fs.Location, metadata: dict[str, Any]) -> None:
    """Cheaply check, before any task is deployed, that every state file `_metadata` names
    exists and is long enough for the sections it holds (checksums are checked where the
    files are read). Raises StateRestoreError (missing or too short: damaged) or
    CheckpointStorageUnavailableError (the storage kept failing), each naming the file."""
    needed: dict[str, int] = {}
    for operator in metadata.get("operators", {}).values():
        for entry in operator["subtasks"]:
            ends = [
                offset + length
                for part in ("keyed", "operator", "timers")
                if (section := entry.get(part)) is not None
                for offset, length in [section]
            ]
            needed[entry["file"]] = max([needed.get(entry["file"], 0), *ends])
    for entry in metadata.get("channel_state", {}).get("subtasks", []):
        end = entry["offset"] + entry["length"]
        needed[entry["file"]] = max(needed.get(entry["file"], 0), end)
    for name, end in sorted(needed.items()):
        target = folder.child(name)
        size = read_storage(lambda t=target: _fs.file_size(t), target, "the state file")
        if size < end:
            message = f"state file {target} is truncated: {size} bytes, its sections need {end}"
            raise file_error(StateRestoreError(message), target)
    for name, expected in shared_files(metadata):  # an incremental checkpoint's shared files
        target = shared_file_location(folder, name)
        size = read_storage(lambda t=target: _fs.file_size(t), target, "the shared file")
        if size != expected:
            message = f"shared file {target} has {size} bytes, the checkpoint needs {expected}"
            raise file_error(StateRestoreError(message), target)
