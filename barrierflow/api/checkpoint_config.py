"""Checkpointing settings, with PyFlink's names.

Preparation: `env.enable_checkpointing(1000)` turns checkpoints on (exactly-once)
and `set_checkpoint_storage("file:///data/checkpoints")` says where they go.
Running: every interval the sources inject a barrier; each completed checkpoint
commits the two-phase-commit sinks. Recovering: a failed task restarts the job
from the latest completed checkpoint, and running the same job (same name, same
storage) again resumes from it.

Modes: EXACTLY_ONCE (the default) aligns barriers; AT_LEAST_ONCE never blocks a
channel (lower latency, duplicates after recovery); `enable_unaligned_checkpoints()`
(EXACTLY_ONCE only) lets barriers overtake in-flight data, which is persisted with the
checkpoint, so checkpoints complete quickly under backpressure; with
`set_aligned_checkpoint_timeout(ms)` a checkpoint starts aligned and switches to
unaligned when alignment takes longer. Caveats: a checkpoint holding in-flight data
cannot be restored with changed parallelism (savepoints are always aligned).

Savepoints (`JobClient.trigger_savepoint`, `stop_with_savepoint`) go to the folder
the call names, else `set_default_savepoint_dir(...)`, else `<checkpoint storage>/savepoints`.
When a job is cancelled its retained checkpoints stay (`RETAIN_ON_CANCELLATION`, the
default: running the job again resumes from them) or go (`DELETE_ON_CANCELLATION`);
savepoints are never deleted.

>>> config = CheckpointConfig()
>>> config.enable_unaligned_checkpoints().set_aligned_checkpoint_timeout(500)
CheckpointConfig(mode=EXACTLY_ONCE, unaligned=True, aligned_timeout_ms=500)
>>> config.is_unaligned_checkpoints_enabled(), config.get_aligned_checkpoint_timeout()
(True, 500)
"""

from __future__ import annotations

import enum
import os
from typing import Any

from barrierflow.cluster.jobmaster.repeated_failures import DEFAULT_LIMIT, check_limit
from barrierflow.core.checkpoint_storage import CheckpointStorage
from barrierflow.core.checkpointing_mode import CheckpointingMode
from barrierflow.errors import ConfigurationError

DEFAULT_CHECKPOINT_DIR = "checkpoints"


class ExternalizedCheckpointRetention(enum.Enum):
    """What happens to a job's retained checkpoints when it is cancelled (Flink 2's names).

    >>> CheckpointConfig().get_externalized_checkpoint_retention().name
    'RETAIN_ON_CANCELLATION'
    """

    RETAIN_ON_CANCELLATION = "retain_on_cancellation"
    """Keep them: running the job again resumes from the latest one."""
    DELETE_ON_CANCELLATION = "delete_on_cancellation"
    """Delete the job's `chk-*` folders when it ends CANCELED (never savepoints)."""


class CheckpointConfig:
    """Mutable settings, read once when the job is submitted."""

    def __init__(self) -> None:
        self.interval_ms: int = -1
        self.mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
        self.storage: str = os.environ.get("BARRIERFLOW_CHECKPOINT_DIR", DEFAULT_CHECKPOINT_DIR)
        self.min_pause_ms: int = 0
        self.timeout_ms: int = 600_000
        self.max_concurrent: int = 1
        self.tolerable_failures: int = 0
        self.retained: int = 1
        self.unaligned: bool = False
        self.aligned_timeout_ms: int = 0
        self.default_savepoint_dir: str | None = None
        self.externalized_retention = ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
        self.allow_fallback_duplicates: bool = False
        self.repeated_failure_limit: int | None = DEFAULT_LIMIT

    def __repr__(self) -> str:
        return (
            f"CheckpointConfig(mode={self.mode.name}, unaligned={self.unaligned}, "
            f"aligned_timeout_ms={self.aligned_timeout_ms})"
        )

    def is_checkpointing_enabled(self) -> bool:
        return self.interval_ms > 0

    def set_checkpoint_interval(self, interval_ms: int) -> CheckpointConfig:
        self.interval_ms = _at_least(interval_ms, 10, "checkpoint interval (ms)")
        return self

    def get_checkpoint_interval(self) -> int:
        return self.interval_ms

    def set_checkpointing_mode(self, mode: CheckpointingMode) -> CheckpointConfig:
        if not isinstance(mode, CheckpointingMode):
            raise ConfigurationError(f"not a CheckpointingMode: {mode!r}")
        self.mode = mode
        return self

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        """Let barriers overtake in-flight data (EXACTLY_ONCE only; checked at submit)."""
        self.unaligned = bool(enabled)
        return self

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        return self.enable_unaligned_checkpoints(False)

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self.unaligned

    def set_aligned_checkpoint_timeout(self, timeout: Any) -> CheckpointConfig:
        """Align first, switch to unaligned after `timeout` (ms or a `Duration`); 0: never align.

        Only matters with unaligned checkpoints enabled, as in Flink.
        """
        if hasattr(timeout, "to_milliseconds"):
            timeout = timeout.to_milliseconds()
        self.aligned_timeout_ms = _at_least(timeout, 0, "aligned checkpoint timeout (ms)")
        return self

    def get_aligned_checkpoint_timeout(self) -> int:
        return self.aligned_timeout_ms

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self.mode

    def set_checkpoint_storage(
        self, storage: str | os.PathLike[str] | CheckpointStorage
    ) -> CheckpointConfig:
        """Where checkpoints go: a folder path or URI (`file:///data/checkpoints`), or one of
        PyFlink's storages (`FileSystemCheckpointStorage(path)`, ...: core/checkpoint_storage)."""
        if isinstance(storage, CheckpointStorage):
            storage = storage.checkpoint_folder(self.storage)
        text = os.fspath(storage)
        if not text:
            raise ConfigurationError("checkpoint storage must be a non-empty path or URI")
        self.storage = text
        return self

    set_checkpoint_storage_dir = set_checkpoint_storage

    def get_checkpoint_storage(self) -> str:
        return self.storage

    def set_min_pause_between_checkpoints(self, min_pause_ms: int) -> CheckpointConfig:
        self.min_pause_ms = _at_least(min_pause_ms, 0, "min pause between checkpoints (ms)")
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return self.min_pause_ms

    def set_checkpoint_timeout(self, timeout_ms: int) -> CheckpointConfig:
        self.timeout_ms = _at_least(timeout_ms, 1, "checkpoint timeout (ms)")
        return self

    def get_checkpoint_timeout(self) -> int:
        return self.timeout_ms

    def set_max_concurrent_checkpoints(self, count: int) -> CheckpointConfig:
        self.max_concurrent = _at_least(count, 1, "max concurrent checkpoints")
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self.max_concurrent

    def set_tolerable_checkpoint_failure_number(self, count: int) -> CheckpointConfig:
        self.tolerable_failures = _at_least(count, 0, "tolerable checkpoint failures")
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self.tolerable_failures

    def set_max_retained_checkpoints(self, count: int) -> CheckpointConfig:
        """How many completed checkpoints to keep (Flink's `state.checkpoints.num-retained`)."""
        self.retained = _at_least(count, 1, "retained checkpoints")
        return self

    def get_max_retained_checkpoints(self) -> int:
        return self.retained

    def set_default_savepoint_dir(self, directory: str | os.PathLike[str]) -> CheckpointConfig:
        """Where savepoints go when the trigger names no folder (a path or URI)."""
        text = os.fspath(directory)
        if not text:
            raise ConfigurationError("the default savepoint folder must be a non-empty path")
        self.default_savepoint_dir = text
        return self

    def get_default_savepoint_dir(self) -> str | None:
        return self.default_savepoint_dir

    def set_externalized_checkpoint_retention(
        self, retention: ExternalizedCheckpointRetention
    ) -> CheckpointConfig:
        """Keep (the default) or delete the job's checkpoints when it is cancelled."""
        if not isinstance(retention, ExternalizedCheckpointRetention):
            raise ConfigurationError(f"not an ExternalizedCheckpointRetention: {retention!r}")
        self.externalized_retention = retention
        return self

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return self.externalized_retention

    def set_allow_fallback_duplicates(self, allowed: bool) -> CheckpointConfig:
        """Let a restore that falls back past a damaged checkpoint go on although a sink
        cannot take back what the abandoned checkpoints committed (e.g. PostgresSink without
        key columns): that output is committed again, and a warning says so. By default
        such a fallback fails the job, naming the damaged checkpoint and the sinks
        (`barrierflow run --allow-fallback-duplicates` sets it for one run)."""
        self.allow_fallback_duplicates = bool(allowed)
        return self

    def is_allow_fallback_duplicates(self) -> bool:
        return self.allow_fallback_duplicates

    def set_repeated_failure_limit(self, limit: int | None) -> CheckpointConfig:
        """Fail the job when the same failure (task, exception type and message) comes
        `limit` times in a row from the same restored checkpoint, no checkpoint completed in
        between: a record that always fails, which restarts would replay for good. Whatever
        the restart strategy; chaos failures, lost processes and unreachable systems never
        count. Default 3; 0 or None: restart as the strategy says.

        >>> CheckpointConfig().set_repeated_failure_limit(5).get_repeated_failure_limit()
        5
        """
        self.repeated_failure_limit = check_limit(limit)
        return self

    def get_repeated_failure_limit(self) -> int | None:
        return self.repeated_failure_limit


def _at_least(value: int, minimum: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value
