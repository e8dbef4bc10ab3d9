"""The persisted checkpoint history of a job: one JSON line per finished checkpoint.

Layout: `<storage>/<job name>/_checkpoint_history.jsonl`, next to the `chk-<n>`
folders and never inside one, so retention (which deletes old `chk-<n>` folders)
leaves it alone. Each line is a `history_record(...)`: a versioned
`CheckpointStats.to_json(details=True)` with the job id of the run that wrote it.
Runs of the same job (same name, same folder) append to the same file, so the
command line shows the history across restarts and reruns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from barrierflow import _fs
from barrierflow.checkpoint.stats import CheckpointStats
from barrierflow.errors import CheckpointStorageError

__all__ = [
    "DEFAULT_HISTORY_LIMIT",
    "HISTORY_FILE",
    "HISTORY_FORMAT_VERSION",
    "CheckpointHistoryFile",
    "history_record",
    "iter_history_lines",
    "parse_history_record",
]

HISTORY_FILE = "_checkpoint_history.jsonl"
DEFAULT_HISTORY_LIMIT = 1000
"""Readers see the last this many checkpoints; the file holds at most twice as many lines."""
HISTORY_FORMAT_VERSION = 1
"""The version of one history record; a reader skips records of versions it does not know."""


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

    def read_records(self) -> list[dict[str, Any]]:
        """The last `limit` readable records (JSON objects), oldest first; [] if no file."""
        text = self._read_text()
        records = [r for r in iter_history_lines(text) if parse_history_record(r) is not None]
        return records[-self.limit :]

    def read(self) -> list[CheckpointStats]:
        """The last `limit` checkpoints, oldest first."""
        return [s for r in self.read_records() if (s := parse_history_record(r)) is not None]

    # ---- writing -------------------------------------------------------------------------------

    def append(self, stats: CheckpointStats, *, job_id: str) -> None:
        """Add one finished checkpoint. Raises CheckpointStorageError if it cannot be written."""
        line = json.dumps(history_record(stats, job_id=job_id), separators=(",", ":")) + "\n"
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
        try:
            return _fs.read_bytes(self.location).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        except OSError as error:
            if not _fs.exists(self.location):
                return ""
            raise CheckpointStorageError(
                f"cannot read the checkpoint history {self.location}: {error}"
            ) from error


# ---- one record -----------------------------------------------------------------------------


def history_record(stats: CheckpointStats, *, job_id: str) -> dict[str, Any]:
    """One line of the persisted history: a versioned `to_json(details=True)`."""
    return {"version": HISTORY_FORMAT_VERSION, "job_id": job_id, **stats.to_json(details=True)}


def parse_history_record(record: dict[str, Any]) -> CheckpointStats | None:
    """The statistics in one persisted line; None for a version this code cannot read."""
    if record.get("version") != HISTORY_FORMAT_VERSION:
        return None
    try:
        return CheckpointStats.from_json(record)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # damaged by hand or by a broken write: skip it, as a torn line


def iter_history_lines(text: str) -> Iterator[dict[str, Any]]:
    """The records of a JSON-lines history; a torn or unreadable line is skipped."""
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line torn by a crash mid-append
        if isinstance(record, dict):
            yield record
