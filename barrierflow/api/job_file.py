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

from barrierflow.api.environment import JobDefined, command_line_defaults
from barrierflow.cluster.jobmaster.restore_point import RestoreMode, SavepointRestoreSettings
from barrierflow.cluster.jobmaster.sink_cleanup import SinkCleanup, clean_up_stopped_job
from barrierflow.cluster.spark.session import SparkOptions
from barrierflow.errors import BarrierflowError, ConfigurationError

RESTORE_MODES = tuple(mode.value for mode in RestoreMode)
"""The restore modes of `--restore-mode`, as `env.set_savepoint_restore` takes them."""
DEFAULT_RESTORE_MODE = RestoreMode.NO_CLAIM.value


def savepoint_restore(
    path: str, allow_non_restored_state: bool = False, restore_mode: str = DEFAULT_RESTORE_MODE
) -> SavepointRestoreSettings:
    """The restore `--from-savepoint PATH` asks for (`command_line_defaults.savepoint_restore`)."""
    return SavepointRestoreSettings.for_path(path, allow_non_restored_state, restore_mode)


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


def spark_options(
    conf: Sequence[str] = (),
    executor_memory: str | None = None,
    num_executors: int | None = None,
    executor_cores: int | None = None,
    py_files: Sequence[str] = (),
    archives: Sequence[str] = (),
) -> SparkOptions:
    """The Spark settings of the command line (`--conf K=V`, `--executor-memory`, ...), as
    `spark-submit` takes them; the named options win over the same key given with --conf.
    `py_files` and `archives` items may each hold several comma-separated paths.

    >>> options = spark_options(["spark.task.cpus=1"], executor_memory="2g",
    ...                         archives=["env.tar.gz#environment"])
    >>> sorted(options.conf.items())  # doctest: +NORMALIZE_WHITESPACE
    [('spark.archives', 'env.tar.gz#environment'), ('spark.executor.memory', '2g'),
     ('spark.task.cpus', '1')]
    """
    settings: dict[str, str] = {}
    for item in conf:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ConfigurationError(
                f"--conf takes KEY=VALUE (e.g. spark.task.cpus=1), not {item!r}"
            )
        settings[key.strip()] = value
    named = {
        "spark.executor.memory": executor_memory,
        "spark.executor.instances": num_executors,
        "spark.executor.cores": executor_cores,
    }
    settings.update({key: str(value) for key, value in named.items() if value is not None})
    archive_list = _split_paths(archives)
    if archive_list:
        given = [settings["spark.archives"]] if settings.get("spark.archives") else []
        settings["spark.archives"] = ",".join([*given, *archive_list])
    files = _split_paths(py_files)
    for path in files:
        if "://" not in path and not os.path.exists(path):
            raise ConfigurationError(f"--py-files: {path} does not exist")
    return SparkOptions(settings, tuple(os.path.abspath(p) if "://" not in p else p for p in files))


def _split_paths(items: Sequence[str]) -> list[str]:
    return [part.strip() for item in items for part in item.split(",") if part.strip()]


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


def clean_up_job_file(
    job_file: Path,
    job_args: Sequence[str] = (),
    *,
    parallelism: int | None = None,
    checkpoint_dir: str | None = None,
    savepoint: str | None = None,
) -> SinkCleanup:
    """Resolve what a killed run of `job_file` left in its sinks, as the next run's restore
    would, without running the job (`barrierflow cleanup`): the file runs only up to its
    first `env.execute()`, which defines the job. Give the run's own settings. Raises
    BarrierflowError when the file defines no job or a run of it holds its checkpoint
    folder; a sink that could not be cleaned up is named in the result's `failures`."""
    restore = savepoint_restore(savepoint) if savepoint is not None else None
    done: list[SinkCleanup] = []

    def define_only(graph: Any, settings: Any) -> None:
        done.append(clean_up_stopped_job(graph, settings))

    try:
        with command_line_settings(
            parallelism=parallelism,
            checkpoint_dir=checkpoint_dir,
            savepoint_restore=restore,
            define_only=define_only,
        ):
            run_job_file(job_file, job_args)
    except JobDefined:
        pass
    if not done:
        raise BarrierflowError(f"{job_file} defined no job: it never called env.execute()")
    return done[0]
