"""Where a job's logs live on the driver: one folder per run, for Spark's log, the
JobMaster's and each task's.

The folder is local to the driver even when checkpoints live on an object store: logs are
appended line by line, which object stores cannot do. Logs carry tracebacks, paths and
what user code logged, so the folders are 0700 and the files 0600, whatever the umask
(`make_private_dir`, `create_private_file`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

LOG_DIR_ENV = "BARRIERFLOW_LOG_DIR"
"""Overrides the parent folder of every job's log folder (default: ./.barrierflow/logs)."""


def logs_root(environ: os._Environ[str] | dict[str, str] = os.environ) -> Path:
    """The folder that holds every job's log folder."""
    return Path(environ.get(LOG_DIR_ENV) or Path.cwd() / ".barrierflow" / "logs").resolve()


def job_log_dir(
    job_name: str, job_id: str, environ: os._Environ[str] | dict[str, str] = os.environ
) -> Path:
    """`<root>/<job name>-<job id>` (the name made safe for a file name); not created here.

    >>> job_log_dir("word count", "4f1c", {"BARRIERFLOW_LOG_DIR": "/tmp/logs"}).as_posix()
    '/tmp/logs/word_count-4f1c'
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", job_name).strip("._") or "job"
    return logs_root(environ) / f"{safe}-{job_id}"


def make_private_dir(folder: Path) -> None:
    """Create `folder` (and a missing logs root above it) readable by its owner only (0700).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> make_private_dir(root / "logs" / "job-1")
    >>> [oct(p.stat().st_mode & 0o777) for p in (root / "logs", root / "logs" / "job-1")]
    ['0o700', '0o700']
    """
    if not folder.parent.exists():
        make_private_dir(folder.parent)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)  # mkdir's mode went through the umask; an existing one is ours


def create_private_file(path: Path) -> None:
    """Create `path` empty for its owner only (0600) if missing, so whoever opens it next
    (a logging handler, the JVM's log4j2) appends to a private file.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "jobmaster.log"
    >>> create_private_file(path)
    >>> oct(path.stat().st_mode & 0o777)
    '0o600'
    """
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600))
