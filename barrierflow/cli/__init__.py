"""The `barrierflow` command line (the console script `barrierflow.cli:main`).

One module per group of commands: `commands` (the group `main`: run, chaos, checkpoints,
cleanup), `jobs` (list, savepoint, stop, cancel) over `remote` (a running job's REST
endpoint), `state` (savepoints read without Spark), `nexmark` (the benchmark); `progress` is
what `run` prints while a job runs. A job file runs through `api/job_file.py`.
"""

from __future__ import annotations

from barrierflow.cli.commands import main

__all__ = ["main"]
