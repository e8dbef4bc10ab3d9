"""PyFlink's checkpoint storage classes, mapped onto barrierflow's one kind of storage: a
checkpoint folder (a path or URI; `chk-N` folders, `_metadata` last).

`env.get_checkpoint_config().set_checkpoint_storage(storage)` takes one of these (PyFlink 1.x's
call; PyFlink 2 sets the same through `execution.checkpointing.dir`) or a plain path:

- `FileSystemCheckpointStorage(path)`: checkpoints go to `path`, as in Flink. The size
  thresholds are kept for their getters; barrierflow writes each subtask's state as its own
  file whatever its size.
- `JobManagerCheckpointStorage(path=None)`: Flink keeps these checkpoints in the JobManager's
  memory. barrierflow has no in-memory checkpoints: they go to `path`, or without one to the
  folder already configured (`checkpoints`, `BARRIERFLOW_CHECKPOINT_DIR`, `--checkpoint-dir`).
  So they outlive the job, and running the same job again resumes from them, where Flink's
  would be gone. `max_state_size` is kept, not enforced.
- `CustomCheckpointStorage(java_object)` wraps Java code: refused when constructed.

>>> FileSystemCheckpointStorage("file:///data/checkpoints").checkpoint_folder("checkpoints")
'file:///data/checkpoints'
>>> JobManagerCheckpointStorage().checkpoint_folder("checkpoints")
'checkpoints'
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any

from barrierflow.errors import ConfigurationError, JobDefinitionError

CUSTOM_CHECKPOINT_STORAGE_REFUSED = (
    "CustomCheckpointStorage wraps a Java CheckpointStorage, which barrierflow cannot run: "
    "use FileSystemCheckpointStorage(path) or set_checkpoint_storage_dir(path)"
)


class CheckpointStorage(ABC):
    """Where a job's checkpoints go; barrierflow's kinds all name a folder."""

    @abstractmethod
    def checkpoint_folder(self, configured: str) -> str:
        """The folder checkpoints go to, given the one configured so far."""


class JobManagerCheckpointStorage(CheckpointStorage):
    """Flink's in-memory checkpoints; here files in `checkpoint_path` or the configured folder
    (see the module's docstring for what that changes)."""

    DEFAULT_MAX_STATE_SIZE = 5 * 1024 * 1024

    def __init__(
        self,
        checkpoint_path: str | os.PathLike[str] | None = None,
        max_state_size: int | None = None,
    ) -> None:
        self._path = None if checkpoint_path is None else _folder(checkpoint_path)
        if max_state_size is None:
            max_state_size = self.DEFAULT_MAX_STATE_SIZE
        if isinstance(max_state_size, bool) or not isinstance(max_state_size, int):
            raise ConfigurationError(
                f"max_state_size must be a number of bytes, got {max_state_size!r}"
            )
        if max_state_size <= 0:
            raise ConfigurationError(f"max_state_size must be positive, got {max_state_size}")
        self._max_state_size = max_state_size

    def checkpoint_folder(self, configured: str) -> str:
        return self._path if self._path is not None else configured

    def get_checkpoint_path(self) -> str | None:
        return self._path

    def get_max_state_size(self) -> int:
        return self._max_state_size

    def get_savepoint_path(self) -> str | None:
        """None: savepoints go where `set_default_savepoint_dir` or the call says."""
        return None

    def __str__(self) -> str:
        return (
            f"JobManagerCheckpointStorage (checkpoints to {self._path or 'the configured folder'})"
        )


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints as files under `checkpoint_path` (a folder path or URI)."""

    MAX_FILE_STATE_THRESHOLD = 1024 * 1024

    def __init__(
        self,
        checkpoint_path: str | os.PathLike[str] | None = None,
        file_state_size_threshold: int | None = None,
        write_buffer_size: int = -1,
    ) -> None:
        if checkpoint_path is None:
            raise ConfigurationError("FileSystemCheckpointStorage needs a checkpoint_path")
        self._path = _folder(checkpoint_path)
        threshold = -1 if file_state_size_threshold is None else file_state_size_threshold
        if not -1 <= _int(threshold, "file_state_size_threshold") <= self.MAX_FILE_STATE_THRESHOLD:
            raise ConfigurationError(
                f"file_state_size_threshold must be -1..{self.MAX_FILE_STATE_THRESHOLD}, "
                f"got {threshold}"
            )
        if _int(write_buffer_size, "write_buffer_size") < -1:
            raise ConfigurationError(
                f"write_buffer_size must be -1 or more, got {write_buffer_size}"
            )
        self._threshold = threshold
        self._write_buffer_size = write_buffer_size

    def checkpoint_folder(self, configured: str) -> str:
        return self._path

    def get_checkpoint_path(self) -> str:
        return self._path

    def get_savepoint_path(self) -> str | None:
        return None

    def get_min_file_size_threshold(self) -> int:
        """As given (-1: Flink's default of 20 KiB); barrierflow writes state files whatever
        their size."""
        return 20 * 1024 if self._threshold == -1 else self._threshold

    def get_write_buffer_size(self) -> int:
        return 4096 if self._write_buffer_size == -1 else self._write_buffer_size

    def __str__(self) -> str:
        return f"FileSystemCheckpointStorage (checkpoints to {self._path})"


class CustomCheckpointStorage(CheckpointStorage):
    """A wrapper of a Java CheckpointStorage in PyFlink: refused when constructed."""

    def __init__(self, j_custom_checkpoint_storage: Any = None) -> None:
        raise JobDefinitionError(CUSTOM_CHECKPOINT_STORAGE_REFUSED)

    def checkpoint_folder(self, configured: str) -> str:  # pragma: no cover - never built
        raise JobDefinitionError(CUSTOM_CHECKPOINT_STORAGE_REFUSED)


def _folder(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path) if isinstance(path, str | os.PathLike) else None
    if not text:
        raise ConfigurationError(f"checkpoint_path must be a non-empty path or URI, got {path!r}")
    return text


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{what} must be a number of bytes, got {value!r}")
    return value
