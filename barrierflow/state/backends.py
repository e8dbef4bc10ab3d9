"""Builds the keyed state backend a job's settings describe (`env.set_state_backend(...)`).

The one place that knows the backend classes: operators call `create_keyed_backend` and
use what it returns through the `KeyedStateBackend` protocol only (`state/backend.py`).
The on-disk backend is imported on first use, so a job on the heap backend never needs
`rocksdict`, and one on RocksDB without it fails with one line naming the install.

>>> from barrierflow.core.state_backends import HashMapStateBackend
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> backend = create_keyed_backend(HashMapStateBackend(), KeyGroupRange(0, 127), 128)
>>> backend.key_group_range, backend.max_parallelism
(KeyGroupRange(start=0, end=127), 128)
>>> create_keyed_backend("rocksdb", KeyGroupRange(0, 127), 128)
Traceback (most recent call last):
...
barrierflow.errors.ConfigurationError: a state backend must be HashMapStateBackend() or \
EmbeddedRocksDBStateBackend(...), got 'rocksdb'
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.errors import ConfigurationError
from barrierflow.state.heap_backend import HeapKeyedStateBackend

if TYPE_CHECKING:
    from barrierflow.state.backend import KeyedStateBackend
    from barrierflow.state.key_groups import KeyGroupRange

ROCKSDB_INSTALL = "pip install 'barrierflow[rocksdb]'"
"""What installs the on-disk backend's binding (the `rocksdb` extra: rocksdict)."""


def check_state_backend(backend: Any) -> StateBackend:
    """`backend` if it is state backend settings; else a ConfigurationError naming the two."""
    if not isinstance(backend, StateBackend) or type(backend) is StateBackend:
        raise ConfigurationError(
            "a state backend must be HashMapStateBackend() or EmbeddedRocksDBStateBackend(...), "
            f"got {backend!r:.200}"
        )
    return backend


def create_keyed_backend(
    settings: StateBackend,
    key_group_range: KeyGroupRange,
    max_parallelism: int,
    local_dir: str | Path | None = None,
    changelog: bool = False,
) -> KeyedStateBackend:
    """A fresh, empty keyed backend of `key_group_range` as `settings` describe.

    `local_dir`: the folder below which the on-disk backend makes the folder of its
    database (callers make it one per operator, subtask and attempt); None: the settings'
    `local_dir`, else the temporary folder. The heap backend ignores it. Raises
    ConfigurationError for settings that are no state backend, or RocksDB without its
    binding installed. `changelog` (`env.enable_changelog_state_backend`): the heap
    backend's changelog checkpoints (`heap_changelog.py`); the on-disk backend ignores it.
    """
    check_state_backend(settings)
    if isinstance(settings, HashMapStateBackend):
        return HeapKeyedStateBackend(key_group_range, max_parallelism, changelog)
    if isinstance(settings, EmbeddedRocksDBStateBackend):
        backend_class = _rocksdb_backend_class()
        folder = local_dir if local_dir is not None else settings.local_dir
        return backend_class(
            key_group_range, max_parallelism, settings, str(folder or tempfile.gettempdir())
        )
    raise ConfigurationError(f"state backend {type(settings).__name__} has no implementation")


def _rocksdb_backend_class() -> Any:
    """`RocksDBKeyedStateBackend`, imported now; a missing rocksdict is a ConfigurationError."""
    try:
        from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] != "rocksdict":
            raise
        raise _missing_rocksdict() from error
    return RocksDBKeyedStateBackend


def check_backend_installed(settings: StateBackend) -> None:
    """Raise the factory's ConfigurationError now (on the driver, at `set_state_backend`)
    when `settings` need a binding this Python lacks."""
    if isinstance(settings, EmbeddedRocksDBStateBackend):
        try:
            import rocksdict  # noqa: F401
        except ModuleNotFoundError as error:
            raise _missing_rocksdict() from error


def _missing_rocksdict() -> ConfigurationError:
    return ConfigurationError(
        f"EmbeddedRocksDBStateBackend needs the rocksdict package, which this Python lacks: "
        f"{ROCKSDB_INSTALL} (on the driver and every executor)"
    )
