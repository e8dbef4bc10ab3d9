"""Fixtures the state tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend

MAX_PARALLELISM = 128
EVERY_KEY_GROUP = KeyGroupRange(0, MAX_PARALLELISM - 1)


@pytest.fixture
def make_rocks(tmp_path: Any) -> Iterator[Callable[..., RocksDBKeyedStateBackend]]:
    """Builds RocksDB backends with a small write-back cache (`entries`) under `tmp_path`,
    disposed of at the test's end."""
    made: list[RocksDBKeyedStateBackend] = []

    def make(
        entries: int = 4, key_groups: KeyGroupRange = EVERY_KEY_GROUP
    ) -> RocksDBKeyedStateBackend:
        settings = EmbeddedRocksDBStateBackend(
            block_cache_mb=8, write_buffer_mb=8, write_cache_entries=entries
        )
        backend = RocksDBKeyedStateBackend(
            key_groups, MAX_PARALLELISM, settings, str(tmp_path / "local")
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.dispose()
