"""Where a job's logs live on the driver: one folder per run, for Spark's log, the
JobMaster's and each task's.

The folder is local to the driver even when checkpoints live on an object store: logs are
appended line by line, which object stores cannot do.
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
