"""The state handles of the RocksDB backend: value, list and map state read and written
through the backend's database at the current key (`rocksdb_backend.py`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rocksdict import (
    WriteBatch,
)

from barrierflow.errors import ConfigurationError
from barrierflow.state.batched import key_group_indices
from barrierflow.state.key_scope import unhashable_key
from barrierflow.state.rocksdb_cache import (
    IMMUTABLE,
    LARGE_VALUE,
    MISSING,
    SIZED,
    Encoded,
    WriteBackCache,
    cache_key,
    cached_form,
    from_raw,
)
from barrierflow.state.rocksdb_db import items_with_prefix, keys_with_prefix
from barrierflow.state.rocksdb_encoding import (
    decode_key,
    decode_list,
    decode_value,
    encode_element,
    encode_key,
    encode_list,
    encode_value,
    key_part,
    state_prefix,
)
from barrierflow.state.values import ListState, MapState, ValueState, list_values

if TYPE_CHECKING:
    from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend


class RocksState:
    """Base of the handles: the backend, the state's name, and its prefix per key group."""

    __slots__ = ("_backend", "_name", "_prefixes")

    def __init__(self, backend: RocksDBKeyedStateBackend, name: str, state_id: int) -> None:
        self._backend = backend
        self._name = name
        self._prefixes = [state_prefix(g, state_id) for g in backend.key_group_range]

    def _db_key(self) -> bytes:
        backend = self._backend
        part = backend._key_part
        if part is None:
            part = backend._encode_current_key()
        return self._prefixes[backend._current_index] + part

    def _encode(self, value: Any, encode: Any = encode_value) -> bytes:
        try:
            return encode(value)
        except Exception as error:
            raise ConfigurationError(
                f"the value of state {self._name!r} for key {self._backend.current_key!r:.200} "
                f"cannot be pickled, so it cannot be stored in RocksDB: {error}"
            ) from error

    def clear(self) -> None:
        backend = self._backend
        backend._db.delete(self._db_key())
        backend._written = True


class RocksValueState(RocksState, ValueState):
    """Value state through a write-back cache (`rocksdb_cache.py`)."""

    __slots__ = ("_cache", "_dirty", "_fetched", "_large", "_values")

    def __init__(self, backend: RocksDBKeyedStateBackend, name: str, state_id: int) -> None:
        super().__init__(backend, name, state_id)
        self._cache = WriteBackCache(self._prefixes, 0)
        self._values = self._cache.values
        self._dirty = self._cache.dirty
        self._fetched: dict[Any, bytes] = {}
        """The RocksDB key of each key the last `prefetch` read (cache key -> RocksDB key):
        an `update()` of one marks it dirty with it, so the flush encodes no key again."""
        self._large: dict[Any, Any] = {}
        """Large values (not cached) the last batched read found, for that read only."""

    def value(self) -> Any:
        backend = self._backend
        cached = backend._cache_key
        if cached is None:
            cached = backend._current_cache_key()
        value = self._values.get(cached, MISSING)
        if value is MISSING:
            value = self._load(cached)
        if type(value) is Encoded:
            return decode_value(value)
        return value

    def _load(self, cached: Any) -> Any:
        """Read the current key's value from RocksDB into the cache (clean); a large one
        is returned without being cached."""
        backend = self._backend
        raw = backend._db.get(self._db_key())
        if raw is not None and len(raw) > LARGE_VALUE:
            return decode_value(raw)
        value = from_raw(raw)
        values = self._values
        values[cached] = value
        if len(values) > self._cache.limit:
            self._cache.make_room(backend._db)
        return value

    def prefetch(self, wanted: dict[Any, tuple[int, Any]]) -> None:
        """Cache, clean, the stored values of the keys of `wanted` (cache key -> (key-group
        index, key)) this cache lacks, read in one multi-get (`backend.prefetch`). Only
        absent keys are read: a cached entry may be newer than RocksDB (dirty), and every
        key not cached has its latest value in RocksDB (writes either go through the cache
        or drop its entry). Large values stay uncached, as `_load` leaves them."""
        values = self._values
        missing = [cached for cached in wanted if cached not in values]
        if not missing:
            return
        prefixes = self._prefixes
        db_keys = []
        for cached in missing:
            index, key = wanted[cached]
            db_keys.append(prefixes[index] + (cached if type(cached) is bytes else key_part(key)))
        raws = self._backend._db.get(db_keys)
        fetched = self._fetched = dict(zip(missing, db_keys, strict=True))
        for cached, raw in zip(missing, raws, strict=True):
            if raw is None:
                values[cached] = None
            elif len(raw) <= LARGE_VALUE:
                value = decode_value(raw)
                values[cached] = value if type(value) in IMMUTABLE else from_raw(raw)
            else:
                del fetched[cached]
        if len(values) > self._cache.limit:
            self._cache.make_room(self._backend._db)

    def update(self, value: Any) -> None:
        backend = self._backend
        cached = backend._cache_key
        if cached is None:
            cached = backend._current_cache_key()
        cls = type(value)
        if cls not in IMMUTABLE:
            value = self._encode(value, cached_form)
            cls = type(value)
        if (cls in SIZED or cls is Encoded) and len(value) > LARGE_VALUE:
            self._write_through(cached, value)
            return
        values = self._values
        values[cached] = value
        index = backend._current_index
        part = backend._key_part  # made when value() missed: the flush needs no new one
        if part is None:  # the RocksDB key made by the last prefetch, else made at the flush
            self._dirty[cached] = self._fetched.get(cached, index)
        else:
            self._dirty[cached] = self._prefixes[index] + part
        if len(values) > self._cache.limit:
            self._cache.make_room(backend._db)

    def clear(self) -> None:
        self.update(None)

    def _write_through(self, cached: Any, value: Any) -> None:
        """Put a large value straight into RocksDB, forgetting what the cache held for it."""
        self._values.pop(cached, None)
        self._dirty.pop(cached, None)
        backend = self._backend
        backend._db.put(
            self._db_key(), bytes(value) if type(value) is Encoded else encode_value(value)
        )
        backend._written = True

    def flush(self) -> bool:
        """Write the dirty cached values to RocksDB; whether there were any."""
        backend = self._backend
        if self._cache.flush(backend._db):
            backend._written = True
            return True
        return False

    # batched access (`state/batched.py`): through the write-back cache when it is on (the
    # keys it lacks in one multi-get, writes kept dirty like `update()`), else one multi-get
    # and one WriteBatch straight to RocksDB
    def _db_keys(self, keys: Any, key_groups: Any) -> list[bytes]:
        backend = self._backend
        indices = key_group_indices(
            keys, key_groups, backend.key_group_range, backend.max_parallelism
        )
        prefixes = self._prefixes
        pairs = zip(indices, keys, strict=True)
        try:
            return [prefixes[index] + key_part(key) for index, key in pairs]
        except Exception as error:
            raise _bad_key(keys, error) from error

    def _cached_keys(self, keys: Any, key_groups: Any) -> tuple[list[int], list[Any]]:
        """Each key's key-group index (misrouted keys refused first) and cache key."""
        backend = self._backend
        indices = key_group_indices(
            keys, key_groups, backend.key_group_range, backend.max_parallelism
        )
        try:
            cached = [
                key if type(key) is str or type(key) is int else cache_key(key) for key in keys
            ]
        except Exception as error:
            raise _bad_key(keys, error) from error
        return indices, cached

    def get_many(self, keys: Any, key_groups: Any = None) -> list[Any]:
        if not len(keys):
            return []
        if self._cache.limit <= 0:
            self.flush()  # the database holds every write
            raws = self._backend._db.get(self._db_keys(keys, key_groups))
            return [None if raw is None else decode_value(raw) for raw in raws]
        indices, cached_keys = self._cached_keys(keys, key_groups)
        values = self._values
        found = [values.get(cached, MISSING) for cached in cached_keys]
        missing = {
            cached: (index, key)
            for cached, index, key, value in zip(cached_keys, indices, keys, found, strict=True)
            if value is MISSING
        }
        if missing:
            self._read_into_cache(missing)
        out = []
        for cached, value in zip(cached_keys, found, strict=True):
            if value is MISSING:
                value = values.get(cached, MISSING)
                if value is MISSING:  # a large value: not cached, read again from RocksDB
                    value = self._large.pop(cached)
            if type(value) is Encoded:
                value = decode_value(value)
            out.append(value)
        self._large = {}
        if len(values) > self._cache.limit:
            self._cache.make_room(self._backend._db)
        return out

    def _read_into_cache(self, missing: dict[Any, tuple[int, Any]]) -> None:
        """One multi-get of the keys the cache lacks (cache key -> (index, key)), cached
        clean; a large value goes to `_large` for the caller instead."""
        prefixes = self._prefixes
        db_keys = [
            prefixes[index] + (cached if type(cached) is bytes else key_part(key))
            for cached, (index, key) in missing.items()
        ]
        values = self._values
        large = self._large = {}
        for cached, raw in zip(missing, self._backend._db.get(db_keys), strict=True):
            if raw is not None and len(raw) > LARGE_VALUE:
                large[cached] = decode_value(raw)
            else:
                values[cached] = from_raw(raw)

    def put_many(self, keys: Any, values: Any, key_groups: Any = None) -> None:
        if not len(keys):
            return
        if self._cache.limit <= 0:
            self._put_around_cache(keys, values, key_groups)
            return
        indices, cached_keys = self._cached_keys(keys, key_groups)
        forms = []
        for key, value in zip(keys, values, strict=True):
            try:
                forms.append(value if type(value) in IMMUTABLE else cached_form(value))
            except Exception as error:
                raise self._unpicklable(key, error) from error
        cache, dirty = self._values, self._dirty
        for cached, index, form in zip(cached_keys, indices, forms, strict=True):
            cls = type(form)
            if (cls in SIZED or cls is Encoded) and len(form) > LARGE_VALUE:
                cache[cached] = form  # written at once below, then forgotten
                dirty[cached] = index
                self.flush()
                del cache[cached]
                continue
            cache[cached] = form
            dirty[cached] = index
        if len(cache) > self._cache.limit:
            self._cache.make_room(self._backend._db)

    def _put_around_cache(self, keys: Any, values: Any, key_groups: Any) -> None:
        batch = WriteBatch(raw_mode=True)
        for db_key, key, value in zip(self._db_keys(keys, key_groups), keys, values, strict=True):
            if value is None:
                batch.delete(db_key)
                continue
            try:
                batch.put(db_key, encode_value(value))
            except Exception as error:
                raise self._unpicklable(key, error) from error
        self._write_around_cache(batch)

    def _unpicklable(self, key: Any, error: Exception) -> ConfigurationError:
        return ConfigurationError(
            f"the value of state {self._name!r} for key {key!r:.200} cannot be "
            f"pickled, so it cannot be stored in RocksDB: {error}"
        )

    def remove_many(self, keys: Any, key_groups: Any = None) -> None:
        if not len(keys):
            return
        if self._cache.limit > 0:
            self.put_many(keys, [None] * len(keys), key_groups)
            return
        batch = WriteBatch(raw_mode=True)
        for db_key in self._db_keys(keys, key_groups):
            batch.delete(db_key)
        self._write_around_cache(batch)

    def _write_around_cache(self, batch: WriteBatch) -> None:
        """Write a batched access's WriteBatch after the cached writes it may overwrite;
        the cache then forgets every entry (some are stale now)."""
        self.flush()
        self._cache.drop()
        backend = self._backend
        backend._db.write(batch)
        backend._written = True


def _bad_key(keys: Any, error: Exception) -> ConfigurationError:
    """A batched access could not encode a key: name it (as `_encode_current_key`)."""
    for key in keys:
        try:
            key_part(key)
        except TypeError:
            return unhashable_key(key)
        except Exception as failure:
            return ConfigurationError(
                f"key {key!r:.200} of type {type(key).__qualname__} cannot be pickled, so the "
                f"RocksDB state backend cannot store state for it: {failure}"
            )
    return ConfigurationError(f"batched keyed state access failed: {error}")


class RocksListState(RocksState, ListState):
    __slots__ = ()

    def get(self) -> list[Any]:
        raw = self._backend._db.get(self._db_key())
        return [] if raw is None else decode_list(raw)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ListState")
        self._append(self._encode(value, encode_element))

    def add_all(self, values: Iterable[Any] | None) -> None:
        new = list_values(values)
        if new:
            self._append(self._encode(new, encode_list))

    def _append(self, data: bytes) -> None:
        backend = self._backend
        db_key = self._db_key()
        old = backend._db.get(db_key)
        backend._db.put(db_key, data if old is None else old + data)
        backend._written = True

    def update(self, values: Iterable[Any] | None) -> None:
        new = list_values(values)
        if new:
            self._backend._db.put(self._db_key(), self._encode(new, encode_list))
            self._backend._written = True
        else:
            self.clear()


class RocksMapState(RocksState, MapState):
    """One RocksDB entry per map key: key group | state | user key | map key."""

    __slots__ = ()

    def _entry_key(self, key: Any) -> bytes:
        try:
            encoded = encode_key(key)
        except TypeError:
            raise
        except Exception as error:
            raise ConfigurationError(
                f"map key {key!r:.200} of state {self._name!r} cannot be pickled, so it cannot "
                f"be stored in RocksDB: {error}"
            ) from error
        return self._db_key() + encoded

    def _entries(self) -> list[tuple[bytes, bytes]]:
        return items_with_prefix(self._backend._db, self._db_key())

    def get(self, key: Any) -> Any:
        raw = self._backend._db.get(self._entry_key(key))
        return None if raw is None else decode_value(raw)

    def put(self, key: Any, value: Any) -> None:
        backend = self._backend
        backend._db.put(self._entry_key(key), self._encode(value))
        backend._written = True

    def put_all(self, mapping: dict[Any, Any]) -> None:
        if not mapping:
            return
        backend = self._backend
        batch = WriteBatch(raw_mode=True)
        for key, value in mapping.items():
            batch.put(self._entry_key(key), self._encode(value))
        backend._db.write(batch)
        backend._written = True

    def remove(self, key: Any) -> None:
        backend = self._backend
        backend._db.delete(self._entry_key(key))
        backend._written = True

    def contains(self, key: Any) -> bool:
        return self._backend._db.get(self._entry_key(key)) is not None

    def keys(self) -> list[Any]:
        start = len(self._db_key())
        return [decode_key(db_key[start:]) for db_key, _ in self._entries()]

    def values(self) -> list[Any]:
        return [decode_value(value) for _, value in self._entries()]

    def items(self) -> list[tuple[Any, Any]]:
        start = len(self._db_key())
        return [(decode_key(k[start:]), decode_value(v)) for k, v in self._entries()]

    def is_empty(self) -> bool:
        prefix = self._db_key()
        for db_key in self._backend._db.keys(from_key=prefix):
            return not db_key.startswith(prefix)
        return True

    def clear(self) -> None:
        backend = self._backend
        prefix = self._db_key()
        keys = keys_with_prefix(backend._db, prefix)
        if keys:
            batch = WriteBatch(raw_mode=True)
            for db_key in keys:
                batch.delete(db_key)
            backend._db.write(batch)
        backend._written = True
