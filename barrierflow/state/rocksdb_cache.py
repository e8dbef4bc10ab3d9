"""A bounded write-back cache of one RocksDB value state's decoded values.

A get or put through rocksdict costs microseconds (plus encoding the key and the value in
Python); a dict lookup costs tens of nanoseconds. So a value state keeps the values it read
or wrote last in a dict: `value()` of a cached key reads the dict, `update()` writes the
dict and marks the key dirty, and the dirty entries reach RocksDB in one WriteBatch when
they are evicted, or before anything reads the database directly (the barrier's snapshot,
`keys()`, the batched path, a restore). A deletion is cached as None (a tombstone); a key
read and found absent is cached as None too, clean.

Semantics are the uncached backend's: a value read is a fresh object unless it is
immutable (exact int, float, str, bytes, bool, None, or a tuple of these, short), so
mutable values are cached encoded (`Encoded`) and decoded on every read; a value that
cannot be pickled fails in `update()`. Values longer than `LARGE_VALUE` bytes are not
cached at all (written through), so the cache's memory is bounded by its entry count.

Cache keys: the user key itself when it is an exact str or int (bool and integral floats
as the int they equal, so `1`, `1.0` and `True` share an entry, as they share a RocksDB
key), else the key's encoded part of the RocksDB key (bytes, never equal to a str or int
cache key). Equal cache keys therefore mean equal RocksDB keys, and the reverse.

>>> cache_key("alice"), cache_key(True), cache_key(2.0), cache_key(None)
('alice', 1, 2, b'\\x01\\x00')
>>> cached_form(5), type(cached_form([1])).__name__, cached_form(("a", 1))
(5, 'Encoded', ('a', 1))
"""

from __future__ import annotations

from itertools import islice
from typing import Any

from rocksdict import Rdict, WriteBatch

from barrierflow.state.rocksdb_encoding import decode_value, encode_value, key_part

MISSING = object()
"""What `values.get(key, MISSING)` returns for a key not in the cache."""

IMMUTABLE = frozenset((int, float, str, bytes, bool, type(None)))
"""Value types the cache holds as they are (a read returns the cached object itself)."""


LARGE_VALUE = 256
"""A value longer than this (str or bytes, or encoded) is not cached: written through and
read from RocksDB each time, so an entry holds at most about this much besides its key."""

SIZED = frozenset((str, bytes))
"""Cached forms whose size the cache checks against `LARGE_VALUE` (with `Encoded`)."""


class Encoded(bytes):
    """A mutable value held encoded (`encode_value`), so every read decodes a fresh object."""

    __slots__ = ()


def cached_form(value: Any) -> Any:
    """What the cache holds for `value`: the value itself when it is immutable, else its
    encoding (pickle's errors propagate: the caller names the state and key)."""
    if type(value) in IMMUTABLE:  # the common case, without a call (every update() comes here)
        return value
    return value if _held_as_is(value) else Encoded(encode_value(value))


def _held_as_is(value: Any) -> bool:
    """Whether the cache holds `value` itself: immutable, or a tuple of short immutables."""
    cls = type(value)
    return cls in IMMUTABLE or (cls is tuple and all(_small(item) for item in value))


def _small(item: Any) -> bool:
    """Whether a tuple's item is immutable and short (the tuple is then cached as it is)."""
    cls = type(item)
    return cls in IMMUTABLE and (cls not in SIZED or len(item) <= 64)


def from_raw(raw: bytes | None) -> Any:
    """What the cache holds for a value RocksDB returned (None: absent)."""
    if raw is None:
        return None
    value = decode_value(raw)
    return value if _held_as_is(value) else Encoded(raw)


def cache_key(key: Any) -> Any:
    """The cache key of user key `key` (module docstring). Raises as `key_part` does."""
    cls = type(key)
    if cls is str or cls is int:
        return key
    if cls is bool or (cls is float and key.is_integer()):
        return int(key)
    return key_part(key)


class WriteBackCache:
    """One value state's cached values (`values`: cache key -> value, None = absent) and
    which of them RocksDB does not have yet (`dirty`: cache key -> its RocksDB key, or
    its key-group index when the key was not encoded).
    Every dirty key is in `values`. At most `limit` entries after `make_room()`; evicts
    the oldest inserted first."""

    __slots__ = ("_prefixes", "dirty", "limit", "values")

    def __init__(self, prefixes: list[bytes], limit: int) -> None:
        self.values: dict[Any, Any] = {}
        self.dirty: dict[Any, int | bytes] = {}
        self.limit = limit
        self._prefixes = prefixes
        """The state's key prefix per key-group index (`state_prefix`)."""

    def make_room(self, db: Rdict) -> None:
        """Evict the oldest entries (a sixteenth of the limit at once, at least one) when
        there are more than `limit`, writing the dirty ones in one WriteBatch."""
        values = self.values
        over = len(values) - self.limit
        if over <= 0:
            return
        dirty = self.dirty
        evicted = []
        for cached in list(islice(values, over + self.limit // 16)):
            value = values.pop(cached)
            where = dirty.pop(cached, None)
            if where is not None:
                evicted.append((cached, where, value))
        if evicted:
            self._write(db, evicted)

    def flush(self, db: Rdict) -> bool:
        """Write every dirty entry in one WriteBatch (they stay cached, clean); whether
        there was any."""
        dirty = self.dirty
        if not dirty:
            return False
        values = self.values
        self._write(db, [(cached, where, values[cached]) for cached, where in dirty.items()])
        dirty.clear()
        return True

    def drop(self) -> None:
        """Forget every entry, dirty ones included (after `flush`, or when the database
        they belong to is replaced)."""
        self.values.clear()
        self.dirty.clear()

    def _write(self, db: Rdict, entries: list[tuple[Any, int | bytes, Any]]) -> None:
        """Write (cache key, RocksDB key or key-group index, value) entries in one WriteBatch
        (a value None deletes)."""
        batch = WriteBatch(raw_mode=True)
        prefixes = self._prefixes
        for cached, where, value in entries:
            if type(where) is bytes:
                db_key = where
            else:
                db_key = prefixes[where] + (cached if type(cached) is bytes else key_part(cached))
            if value is None:
                batch.delete(db_key)
            elif type(value) is Encoded:
                batch.put(db_key, bytes(value))
            else:
                batch.put(db_key, encode_value(value))
        db.write(batch)
