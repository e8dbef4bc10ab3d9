"""Running a user's job file as `__main__` under the command line's settings.

`barrierflow run` runs a job file once; `barrierflow chaos` runs the same file twice in one
process. Settings reach the file's environments through `command_line_defaults` for the
duration of the run only, and modules the file imports from its own folder are forgotten
afterwards, so a second run builds its sinks afresh.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import runpy
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from barrierflow.api.environment import command_line_defaults


@contextlib.contextmanager
def command_line_settings(**settings: Any) -> Iterator[None]:
    """Set fields of `command_line_defaults` for the block, then restore every field."""
    before = dataclasses.replace(command_line_defaults)
    for name, value in settings.items():
        if not hasattr(before, name):
            raise AttributeError(f"no command line setting {name!r}")
        setattr(command_line_defaults, name, value)
    try:
        yield
    finally:  # the settings belong to this run only (tests run several in one process)
        for field in dataclasses.fields(before):
            setattr(command_line_defaults, field.name, getattr(before, field.name))


def run_job_file(job_file: Path, job_args: Sequence[str]) -> None:
    """Run `job_file` as `__main__` with `sys.argv` = [job_file, *job_args] and its folder
    first on `sys.path`; both are restored afterwards."""
    folder = str(job_file.resolve().parent)
    saved_argv, before = sys.argv, set(sys.modules)
    sys.argv = [str(job_file), *job_args]
    sys.path.insert(0, folder)
    try:
        runpy.run_path(str(job_file), run_name="__main__")
    finally:
        sys.argv = saved_argv
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        for name in set(sys.modules) - before:
            path = getattr(sys.modules[name], "__file__", None)
            if path and os.path.abspath(path).startswith(folder + os.sep):
                del sys.modules[name]
