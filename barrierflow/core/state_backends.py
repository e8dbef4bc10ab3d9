"""Where a job keeps its keyed state, with PyFlink's names (`env.set_state_backend(...)`).

Plain settings, picklable, sent to every task; `barrierflow.state.backends` builds the
backend they describe.

>>> backend = EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)
>>> backend.is_incremental_checkpoints_enabled()
True
>>> HashMapStateBackend().name
'hashmap'
"""

from __future__ import annotations

from dataclasses import dataclass

from barrierflow.core.rocksdb_profiles import PredefinedOptions
from barrierflow.errors import ConfigurationError

DEFAULT_BLOCK_CACHE_MB = 64
"""The on-disk backend's block cache per task process (shared by its column families)."""

DEFAULT_WRITE_BUFFER_MB = 32
"""The on-disk backend's memtable budget per task process (a write buffer manager)."""

DEFAULT_WRITE_CACHE_ENTRIES = 100_000
"""Decoded values the on-disk backend caches per keyed operator and subtask, in front of
RocksDB (`state/rocksdb_cache.py`): some 15-25 MiB for small keys and values."""


class StateBackend:
    """Base of the state backend settings; `name` is what checkpoints and logs show."""

    name: str = ""


@dataclass(frozen=True)
class HashMapStateBackend(StateBackend):
    """Keyed state in Python dicts (the default): fastest, bounded by the task's memory.

    Snapshots are asynchronous: the barrier takes a copy-on-write view, serialization runs
    on another thread.
    """

    name = "hashmap"


@dataclass(frozen=True)
class EmbeddedRocksDBStateBackend(StateBackend):
    """Keyed state in an embedded RocksDB per subtask, on the task host's local disk.

    State may outgrow memory; `block_cache_mb` and `write_buffer_mb` bound what RocksDB
    holds in memory per task process, `write_cache_entries` how many decoded values each
    keyed operator of a subtask caches in front of it (0: none). Checkpoints take
    RocksDB's native checkpoint (hard links) at the barrier and upload its files
    asynchronously; with `enable_incremental_checkpointing` only files no earlier
    checkpoint uploaded.
    `local_dir`: where the databases live (default: the task's temporary folder).
    """

    enable_incremental_checkpointing: bool = False
    local_dir: str | None = None
    block_cache_mb: int = DEFAULT_BLOCK_CACHE_MB
    write_buffer_mb: int = DEFAULT_WRITE_BUFFER_MB
    write_cache_entries: int = DEFAULT_WRITE_CACHE_ENTRIES

    name = "rocksdb"

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigurationError naming the first bad setting. Run on construction and
        again where the database options are built (`state/rocksdb_options.py`): settings
        unpickled from elsewhere skip `__post_init__`."""
        if not isinstance(self.enable_incremental_checkpointing, bool):
            raise ConfigurationError(
                "enable_incremental_checkpointing must be True or False, got "
                f"{self.enable_incremental_checkpointing!r}"
            )
        for field_name in ("block_cache_mb", "write_buffer_mb"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigurationError(
                    f"{field_name} must be a positive number of MiB, got {value!r}"
                )
        entries = self.write_cache_entries
        if not isinstance(entries, int) or isinstance(entries, bool) or entries < 0:
            raise ConfigurationError(
                f"write_cache_entries must be a number of values >= 0, got {entries!r}"
            )

    def is_incremental_checkpoints_enabled(self) -> bool:
        """PyFlink's name for `enable_incremental_checkpointing`."""
        return self.enable_incremental_checkpointing

    def set_predefined_options(self, options: PredefinedOptions) -> None:
        """PyFlink's RocksDB profile: it sets the memory settings it translates to where this
        backend keeps the defaults (core/rocksdb_profiles.py says what each profile means
        here). Changes this object in place, as PyFlink's call does."""
        if not isinstance(options, PredefinedOptions):
            raise ConfigurationError(f"not a PredefinedOptions: {options!r}")
        defaults = {
            "block_cache_mb": DEFAULT_BLOCK_CACHE_MB,
            "write_buffer_mb": DEFAULT_WRITE_BUFFER_MB,
        }
        for name, value in options.memory_settings().items():
            if getattr(self, name) == defaults[name]:
                object.__setattr__(self, name, value)  # frozen fields: PyFlink's call mutates
        object.__setattr__(self, "_predefined_options", options)

    def get_predefined_options(self) -> PredefinedOptions:
        return getattr(self, "_predefined_options", PredefinedOptions.DEFAULT)
