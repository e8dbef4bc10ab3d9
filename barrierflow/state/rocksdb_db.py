"""The database a RocksDB backend keeps: opening it (with the options of
`rocksdb_options.py`, within the task process's memory budget), prefix scans, and batched
writes.
"""

from __future__ import annotations

from rocksdict import AccessType, Rdict, WriteBatch

from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import StateRestoreError
from barrierflow.state.rocksdb_options import db_options, shared_memory, write_options

__all__ = ["db_options", "shared_memory", "write_options"]  # built in rocksdb_options.py

BATCH_ENTRIES = 20_000


def open_read_only(path: str, settings: EmbeddedRocksDBStateBackend) -> Rdict:
    try:
        return Rdict(path, db_options(settings), access_type=AccessType.read_only())
    except Exception as error:
        raise StateRestoreError(f"the RocksDB files in {path} cannot be opened: {error}") from error


def keys_with_prefix(db: Rdict, prefix: bytes) -> list[bytes]:
    """Every RocksDB key starting with `prefix`, in order."""
    found = []
    for db_key in db.keys(from_key=prefix):
        if not db_key.startswith(prefix):
            break
        found.append(db_key)
    return found


def items_with_prefix(db: Rdict, prefix: bytes) -> list[tuple[bytes, bytes]]:
    found = []
    for db_key, value in db.items(from_key=prefix):
        if not db_key.startswith(prefix):
            break
        found.append((db_key, value))
    return found


class Batcher:
    """Writes through WriteBatches of `BATCH_ENTRIES` entries (a restore's copy)."""

    def __init__(self, db: Rdict) -> None:
        self._db = db
        self._batch = WriteBatch(raw_mode=True)
        self._size = 0

    def put(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value)
        self._size += 1
        if self._size >= BATCH_ENTRIES:
            self._flush()

    def _flush(self) -> None:
        if self._size:
            self._db.write(self._batch)
            self._batch = WriteBatch(raw_mode=True)
            self._size = 0

    def finish(self) -> None:
        self._flush()
