"""The job's log files over REST: only plain file names inside the job's log folder.

`list_logs` answers `/jobs/<id>/logs` (Flink's `{"logs": [{"name", "size", "mtime"}]}`),
`read_log` answers `/jobs/<id>/logs/<name>[?tail=N]`. A name is a plain file name
(letters, digits, `.`, `_`, `-`, not starting with a dot): anything else — `..`, a slash
however encoded, an absolute path — is refused before the file system is asked, and a
file that is a symlink, or resolves outside the folder, is a 404 like a missing one, so
nothing outside the folder is ever read. The folder is cluster/log_dir.py's job_log_dir.
"""

from __future__ import annotations

import os
import re
import stat
from http import HTTPStatus
from pathlib import Path
from typing import Any

from barrierflow.cluster.rest.actions import RestError

__all__ = ["MAX_LOG_BYTES", "MAX_TAIL_LINES", "list_logs", "read_log"]

MAX_LOG_BYTES = 8 * 1024 * 1024
"""The most of a log file one request returns (its end, when the file is longer)."""
MAX_TAIL_LINES = 100_000

_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")


def list_logs(folder: str | None) -> dict[str, Any]:
    """The folder's regular files (not symlinks), by name; none while it does not exist."""
    logs = []
    if folder is not None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            entries = []
        for entry in entries:
            if not _NAME.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            logs.append(
                {"name": entry.name, "size": info.st_size, "mtime": int(info.st_mtime * 1000)}
            )
    return {"logs": logs}


def read_log(folder: str | None, name: str, tail: str | None = None) -> bytes:
    """The file's text (its last MAX_LOG_BYTES), or its last `tail` lines."""
    if not _NAME.fullmatch(name):
        raise RestError(
            HTTPStatus.BAD_REQUEST,
            f"{name!r} is not a log file name (a plain file name of the job's log folder)",
        )
    lines = _tail_lines(tail)
    if folder is None:
        raise RestError(HTTPStatus.NOT_FOUND, "this endpoint serves no log files")
    base = Path(folder).resolve()
    path = base / name
    missing = RestError(HTTPStatus.NOT_FOUND, f"no log file {name} in the job's log folder")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        raise missing from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or path.resolve().parent != base:
            raise missing
        size = info.st_size
        file.seek(max(0, size - MAX_LOG_BYTES))
        data = file.read(MAX_LOG_BYTES)
    if lines is not None:
        kept = data.splitlines(keepends=True)
        data = b"".join(kept[-lines:]) if lines else b""
    return data


def _tail_lines(tail: str | None) -> int | None:
    if tail is None:
        return None
    if not re.fullmatch(r"[0-9]{1,9}", tail) or int(tail) > MAX_TAIL_LINES:
        raise RestError(
            HTTPStatus.BAD_REQUEST,
            f"tail must be a number of lines from 0 to {MAX_TAIL_LINES}, got {tail!r}",
        )
    return int(tail)
