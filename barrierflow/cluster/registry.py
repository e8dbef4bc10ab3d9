"""The per-user registry of running jobs: how `barrierflow list` and friends find a job.

Every running job with a REST endpoint writes one JSON file, `<job id>.json`, into a
folder of the user's (`${XDG_STATE_HOME:-~/.local/state}/barrierflow/jobs`, or
`BARRIERFLOW_REGISTRY_DIR`), and removes it when it ends. The file holds what a command
needs to reach the job: its REST URL and the token its actions require. The folder is
0700 and each file 0600, written to a temporary name and renamed, so a reader never sees
half an entry and no other user reads a token.

A job killed without cleaning up leaves its file behind. An entry whose process is gone
on this host is stale: readers skip it and remove it. Entries of other hosts (a home
folder shared over the network) are kept, since their pids mean nothing here.

>>> import tempfile
>>> registry = JobRegistry(Path(tempfile.mkdtemp()) / "jobs")
>>> _ = registry.register(JobEntry("4f1c", "word-count", "http://127.0.0.1:8081", "t0k",
...                                os.getpid(), registry.host, 1_000))
>>> [(e.job_id, e.name) for e in registry.entries()]
[('4f1c', 'word-count')]
>>> registry.unregister("4f1c"); registry.entries()
[]
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["REGISTRY_DIR_VARIABLE", "JobEntry", "JobRegistry", "default_registry_dir"]

log = logging.getLogger(__name__)

REGISTRY_DIR_VARIABLE = "BARRIERFLOW_REGISTRY_DIR"
_VERSION = 1
_SUFFIX = ".json"


@dataclass(frozen=True)
class JobEntry:
    """One running job as the registry holds it."""

    job_id: str
    name: str
    rest_url: str
    """The REST endpoint's base URL, `http://host:port`."""
    token: str
    """What `Authorization: Bearer ...` must carry for the job's actions."""
    pid: int
    """The driver process, whose death makes the entry stale."""
    host: str
    start_ms: int
    """When the job started (epoch milliseconds)."""


def default_registry_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`BARRIERFLOW_REGISTRY_DIR`, else `$XDG_STATE_HOME/barrierflow/jobs`, else
    `~/.local/state/barrierflow/jobs`.

    >>> default_registry_dir({"XDG_STATE_HOME": "/s"}).as_posix()
    '/s/barrierflow/jobs'
    >>> default_registry_dir({"BARRIERFLOW_REGISTRY_DIR": "/r", "XDG_STATE_HOME": "/s"}).as_posix()
    '/r'
    """
    environ = os.environ if environ is None else environ
    if environ.get(REGISTRY_DIR_VARIABLE):
        return Path(environ[REGISTRY_DIR_VARIABLE]).expanduser()
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser() / "barrierflow" / "jobs"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


class JobRegistry:
    """The registry folder. Any thread, any process: every change is one atomic rename."""

    def __init__(
        self,
        folder: Path,
        *,
        host: str | None = None,
        is_alive: Callable[[int], bool] = _pid_alive,
    ) -> None:
        self.folder = folder
        self.host = host if host is not None else socket.gethostname()
        self._is_alive = is_alive

    @classmethod
    def default(cls) -> JobRegistry:
        """The current user's registry (see `default_registry_dir`)."""
        return cls(default_registry_dir())

    def register(self, entry: JobEntry) -> Path:
        """Write `entry` (replacing one of the same job id); the file's path."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):  # a folder made by someone else stays theirs
            self.folder.chmod(0o700)
        path = self._path(entry.job_id)
        data = json.dumps({"version": _VERSION, **asdict(entry)}, indent=2).encode()
        fd, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=_SUFFIX, dir=self.folder)
        try:
            with os.fdopen(fd, "wb") as file:  # mkstemp made it 0600
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return path

    def unregister(self, job_id: str) -> None:
        """Remove the job's entry; nothing if there is none."""
        with contextlib.suppress(FileNotFoundError):
            self._path(job_id).unlink()

    def entries(self) -> list[JobEntry]:
        """The live entries, oldest first; stale ones of this host are removed on the way.
        Unreadable files (another version, not an entry) are skipped."""
        try:
            names = sorted(p for p in self.folder.iterdir() if p.name.endswith(_SUFFIX))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for path in names:
            if path.name.startswith("."):
                continue
            entry = self._read(path)
            if entry is None:
                continue
            if entry.host == self.host and not self._is_alive(entry.pid):
                log.info(
                    "removing the stale registry entry of job %s (pid %d is gone): %s",
                    entry.job_id,
                    entry.pid,
                    path,
                )
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                continue
            found.append(entry)
        return sorted(found, key=lambda e: (e.start_ms, e.job_id))

    def _read(self, path: Path) -> JobEntry | None:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.pop("version", None) != _VERSION:
                raise ValueError("unknown version")
            return JobEntry(**document)
        except FileNotFoundError:  # the job ended meanwhile
            return None
        except (OSError, ValueError, TypeError) as error:
            log.debug("skipping %s: not a registry entry (%s)", path, error)
            return None

    def _path(self, job_id: str) -> Path:
        if not job_id or "/" in job_id or job_id.startswith("."):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.folder / f"{job_id}{_SUFFIX}"
