"""What a job's executors need besides its own code (PyFlink's `add_python_file`,
`add_python_archive`, `set_python_executable`, `set_python_requirements`, `add_jars`,
`add_classpaths`), as `StreamExecutionEnvironment` methods: each becomes a Spark setting of
the job's session, is accepted and ignored (jars: barrierflow runs no Java code of the job),
or is refused when called, naming what to do instead."""

from __future__ import annotations

import logging
import os
from typing import Any

from barrierflow.cluster.spark.session import python_file_for_spark
from barrierflow.errors import ConfigurationError

log = logging.getLogger(__name__)


class PythonDependencies:
    """Mixed into `StreamExecutionEnvironment`: fills `_python_files` (`addPyFile`) and
    `_dependency_conf` (Spark conf keys of the session the job starts)."""

    _python_files: list[str]
    _dependency_conf: dict[str, str]

    def add_python_file(self, file_path: str) -> Any:
        """Ship a .py, .zip or .egg file (or a folder, zipped) to the executors and put it on
        their Python path before the first attempt, like `--py-files`: for modules the job's
        code imports that the executors' Python lacks."""
        python_file_for_spark(file_path)  # a missing or unusable path fails here
        self._python_files.append(file_path if "://" in file_path else os.path.abspath(file_path))
        return self

    def add_python_archive(self, archive_path: str, target_dir: str | None = None) -> Any:
        """Ship an archive (.zip, .tar.gz: a packed virtualenv, data files) to the executors,
        unpacked in their working folder under `target_dir` (default: the archive's name), as
        Spark's `spark.archives` / `--archives` does on cluster masters."""
        if "://" not in archive_path and not os.path.isfile(archive_path):
            raise ConfigurationError(f"python archive {archive_path} does not exist")
        path = archive_path if "://" in archive_path else os.path.abspath(archive_path)
        entry = f"{path}#{target_dir}" if target_dir else path
        archives = self._dependency_conf.get("spark.archives")
        self._dependency_conf["spark.archives"] = f"{archives},{entry}" if archives else entry
        return self

    def set_python_executable(self, python_exec: str) -> Any:
        """The Python the executors run the stream tasks with (Spark's
        `spark.pyspark.python`), e.g. one inside an archive added with `add_python_archive`."""
        if not isinstance(python_exec, str) or not python_exec:
            raise ConfigurationError(f"python executable must be a path, got {python_exec!r}")
        self._dependency_conf["spark.pyspark.python"] = python_exec
        return self

    def set_python_requirements(
        self, requirements_file_path: str, requirements_cache_dir: str | None = None
    ) -> Any:
        """Refused: barrierflow does not pip-install on the executors while a job starts."""
        raise ConfigurationError(
            f"set_python_requirements({requirements_file_path!r}) is not supported: barrierflow "
            "does not install packages on the executors; install them in the executors' "
            "Python, or pack an environment and ship it with add_python_archive (--archives)"
        )

    def add_jars(self, *jars_path: str) -> Any:
        """Accepted and ignored: Flink's jars hold Java connectors and formats; barrierflow
        runs Python connectors only (each PyFlink connector's barrierflow counterpart is in
        docs/porting.md), so no jar is needed. A warning names the jars."""
        log.warning("add_jars: barrierflow runs no Java code of the job; ignored %s", jars_path)
        return self

    def add_classpaths(self, *classpaths: str) -> Any:
        """Accepted and ignored, as `add_jars`."""
        log.warning("add_classpaths: barrierflow runs no Java code of the job; ignored %s",
                    classpaths)  # fmt: skip
        return self


def not_runnable(method: str, expected: str, given: Any) -> str:
    """The one line refusing a PyFlink SourceFunction/SinkFunction (or anything else that is
    no barrierflow connector) given to `add_source`/`add_sink`.

    >>> not_runnable("add_sink", "Sink (FileSink, ...)", object())
    "add_sink needs a barrierflow Sink (FileSink, ...), got object: a PyFlink SourceFunction \
or SinkFunction wraps Java code, which barrierflow cannot run (docs/porting.md names each \
connector's counterpart)"
    """
    return (
        f"{method} needs a barrierflow {expected}, got {type(given).__name__}: a PyFlink "
        "SourceFunction or SinkFunction wraps Java code, which barrierflow cannot run "
        "(docs/porting.md names each connector's counterpart)"
    )
