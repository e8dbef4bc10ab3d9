"""The persisted checkpoint history of a job: one JSON line per finished checkpoint.

Layout: `<storage>/<job name>/_checkpoint_history.jsonl`, next to the `chk-<n>`
folders and never inside one, so retention (which deletes old `chk-<n>` folders)
leaves it alone. Each line is one record of `history_codec` (a versioned
checkpoint with every subtask, and the job id of the run that wrote it).
Runs of the same job (same name, same folder) append to the same file, so the
command line shows the history across restarts and reruns, and a rerun finds the job's
savepoints there (they live in folders of their own, outside the job's folder).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.files import read_storage
from barrierflow.checkpoint.history_codec import (
    HISTORY_FORMAT_VERSION,
    HistoryRecord,
    UnreadableRecordError,
    decode_record,
    encode_record,
)
from barrierflow.checkpoint.retry import retry_transient
from barrierflow.checkpoint.stats import CheckpointStats, CheckpointStatsStatus
from barrierflow.checkpoint.storage import METADATA
from barrierflow.errors import CheckpointStorageError, CheckpointStorageUnavailableError

log = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "HISTORY_FILE",
    "HISTORY_FORMAT_VERSION",
    "CheckpointHistoryFile",
    "HistoryRecord",
]

HISTORY_FILE = "_checkpoint_history.jsonl"
DEFAULT_HISTORY_LIMIT = 1000
"""Readers see the last this many checkpoints; the file holds at most twice as many lines."""


class CheckpointHistoryFile:
    """One job's checkpoint history file. One writer: the JobMaster thread.

    Guarantees that readers see whole records, oldest first, at most `limit` of them,
    and that the file never grows past `2 * limit` lines: an append that would pass it
    first rewrites the file (atomically) with the newest records. Appends where the
    filesystem can append (local, HDFS), rewrites where it cannot (object stores).
    Assumes one writer per job folder at a time, as one job runs per folder.
    """

    def __init__(self, job_dir: _fs.Location, limit: int = DEFAULT_HISTORY_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"a history keeps at least one checkpoint, not {limit}")
        self.job_dir = job_dir
        self.location = job_dir.child(HISTORY_FILE)
        self.limit = limit
        self._lines: int | None = None
        """Lines in the file, counted on the first append; None before."""
        self._torn = False
        """The file ends without a newline (a crash mid-append): start with one."""

    # ---- reading -------------------------------------------------------------------------------

    def read_entries(self) -> list[HistoryRecord]:
        """The last `limit` readable records, oldest first; [] if there is no file.

        A line torn by a crash, a damaged record and a record of a version this code does
        not know are skipped. Raises CheckpointStorageError, naming the file, when the file
        exists but cannot be read.
        """
        entries = []
        for raw in _json_lines(self._read_text()):
            try:
                entries.append(decode_record(raw))
            except UnreadableRecordError:
                continue
        return entries[-self.limit :]

    def read(self) -> list[CheckpointStats]:
        """The last `limit` checkpoints, oldest first."""
        return [entry.stats for entry in self.read_entries()]

    def first_unused_id(self) -> int:
        """Above every checkpoint id in the history, so ids never repeat in a job's folder
        even where a failed checkpoint's folder was deleted; 1 if the history is unreadable
        (logged: the folder's own chk-N names still keep ids apart)."""
        try:
            highest = self.highest_checkpoint_id()
        except CheckpointStorageError as error:
            log.warning("%s", error)
            return 1
        return (highest or 0) + 1

    def highest_checkpoint_id(self) -> int | None:
        """The largest checkpoint id in the history, None when it holds none."""
        return max((e.stats.checkpoint_id for e in self.read_entries()), default=None)

    def completed_savepoints(self, since: int = 1) -> dict[int, _fs.Location]:
        """The folders of the job's completed savepoints with an id of at least `since`, by
        checkpoint id, whose folder still holds `_metadata` (a savepoint the user deleted or
        moved is no candidate for a restore, and no damage either). {} if the history is
        unreadable (logged: the retained checkpoints still restore). A storage fault that
        outlives the retries raises CheckpointStorageUnavailableError: skipping a savepoint
        for a 503 would restore an older checkpoint and commit its output again."""
        try:
            entries = self.read_entries()
        except CheckpointStorageUnavailableError:
            raise
        except CheckpointStorageError as error:
            log.warning("%s", error)
            return {}
        found = {}
        for entry in entries:
            stats = entry.stats
            if (
                stats.is_savepoint
                and stats.status is CheckpointStatsStatus.COMPLETED
                and stats.external_path
                and stats.checkpoint_id >= since
            ):
                found[stats.checkpoint_id] = _fs.Location(stats.external_path)
        return {n: folder for n, folder in found.items() if _holds_metadata(folder)}

    # ---- writing -------------------------------------------------------------------------------

    def append(self, stats: CheckpointStats, *, job_id: str) -> None:
        """Add one finished checkpoint. Raises CheckpointStorageError if it cannot be written."""
        line = json.dumps(encode_record(stats, job_id=job_id), separators=(",", ":")) + "\n"
        try:
            if self._lines is None:
                _fs.make_dirs(self.job_dir)
                text = self._read_text()
                self._lines = sum(1 for x in text.splitlines() if x.strip())
                self._torn = bool(text) and not text.endswith("\n")
            if self._lines + 1 > 2 * self.limit:
                self._rewrite(line, keep=self.limit - 1)
                return
            if self._torn:
                line = "\n" + line
            try:
                with self.location.filesystem.open_append_stream(self.location.path) as stream:
                    stream.write(line.encode())
                _fs.sync_file(self.location)
            except NotImplementedError:  # object stores cannot append
                self._rewrite(line, keep=2 * self.limit - 1)
                return
            self._lines += 1
            self._torn = False
        except OSError as error:
            raise CheckpointStorageError(
                f"cannot write the checkpoint history {self.location}: {error}"
            ) from error

    def _rewrite(self, line: str, keep: int) -> None:
        kept = [x for x in self._read_text().splitlines() if x.strip()][-keep:] if keep else []
        body = "".join(x + "\n" for x in kept) + line
        _fs.write_atomic(self.location, body.encode())
        self._lines = len(kept) + 1
        self._torn = False

    def _read_text(self) -> str:
        """The file's text, "" if there is none; transient faults are retried, then raise
        CheckpointStorageUnavailableError."""
        what = f"reading the checkpoint history {self.location}"
        try:
            data = retry_transient(lambda: _fs.read_bytes(self.location), what)
            return data.decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        except OSError as error:
            if not _fs.exists(self.location):
                return ""
            message = f"cannot read the checkpoint history {self.location} now: {error}"
            raise CheckpointStorageUnavailableError(message) from error


def _holds_metadata(folder: _fs.Location) -> bool:
    """Whether a savepoint's folder still holds `_metadata`; transient faults are retried,
    then raise CheckpointStorageUnavailableError (a savepoint is not skipped for a 503)."""
    target = folder.child(METADATA)
    try:
        return read_storage(lambda: _fs.exists(target), target, "the file")
    except CheckpointStorageUnavailableError:
        raise
    except CheckpointStorageError as error:  # pyarrow: an unknown scheme is a ValueError
        log.warning("savepoint %s is not restored: cannot look into it: %s", folder, error)
        return False


# ---- lines -----------------------------------------------------------------------------------


def _json_lines(text: str) -> Iterator[Any]:
    """The JSON values of a JSON-lines text; a line torn by a crash mid-append is skipped."""
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue
