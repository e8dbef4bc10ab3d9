"""The on-disk keyed state backend: keyed state in an embedded RocksDB (through `rocksdict`).

State may outgrow memory: RocksDB keeps it in files on the task host's local disk and
holds only its block cache and memtables in memory, both shared by every backend of a
task process and bounded by `EmbeddedRocksDBStateBackend.block_cache_mb` and
`write_buffer_mb` (see `shared_memory`). One database per backend (subtask and operator),
one column family, keys laid out as key group | state id | user key | [map key]
(`rocksdb_encoding.py`), so a key-group range is one contiguous range of keys: restore
clips with `delete_range`, a canonical snapshot is one ordered scan. One column family
with a state-id prefix rather than one per state (Flink's layout): one memtable per
database, one range delete clips every state, and the per-key-group order of the
canonical format falls out of the key order.

Semantics are the heap backend's, with one difference Flink's RocksDB backend has too:
values read are fresh objects, so a value mutated in place changes nothing until it is
written back with `update()` / `put()`. Keys (user keys and map keys) follow a dict's
equality for int, bool, float, str, bytes, None and tuples of these; other keys are
pickled and equal only when their pickles are (see `rocksdb_encoding.py`). `keys()` lists
keys per key group in byte order, not insertion order. A value or key that cannot be
pickled fails when it is written (ConfigurationError), not at the next checkpoint.

Writes skip the write-ahead log: a checkpoint flushes the memtable and takes RocksDB's
native checkpoint (hard links, no copy) at the barrier; a failure restores from the last
completed checkpoint, never from the local database (as Flink does).

Checkpoint format: a "rocksdb-keyed-state" envelope whose msgpack header is

    {"version": 1, "max_parallelism": 128, "key_group_range": [start, end],
     "states": [[name, kind], ...],                # state id = position in this list
     "files": [[name, size, crc32], ...],          # relative to the checkpoint folder
     "shared": [[local name, name, size, crc32], ...]}  # incremental only; relative to
                                                   # the job folder (the chk's parent)

naming the native checkpoint's files uploaded next to the subtask state file. Without
`enable_incremental_checkpointing` every upload is full and "shared" is absent. With it,
a checkpoint uploads into the job folder's `shared/` only the SST files the last
completed checkpoint (or a restore from the same job folder) did not, references the
others there, and keeps MANIFEST, CURRENT and OPTIONS private (`rocksdb_uploads.py`).
Savepoints (`write(None)`) are the canonical "keyed-state" envelope of `heap_backend.py`,
with the same content the heap backend writes for the same state (keys in byte order,
not insertion order), and `native_to_canonical`
turns a checkpoint's native section into it (the state processor reads either).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import shutil
import struct
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from rocksdict import (
    Checkpoint,
    Rdict,
)

from barrierflow import _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.core.state_descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state.heap_backend import KEYED_STATE, decode_key_group
from barrierflow.state.key_groups import KeyGroupRange, stable_hash
from barrierflow.state.key_scope import (
    NO_KEY,
    KeyScope,
    unhashable_key,
)
from barrierflow.state.rocksdb_cache import cache_key
from barrierflow.state.rocksdb_db import (
    Batcher,
    db_options,
    keys_with_prefix,
    open_read_only,
    write_options,
)
from barrierflow.state.rocksdb_encoding import (
    MAX_KEY_GROUPS,
    NATIVE_KIND,
    PREFIX_BYTES,
    decode_key,
    encode_key,
    encode_list,
    encode_value,
    key_group_prefix,
    key_part,
    split_key_part,
    split_prefix,
    state_prefix,
)
from barrierflow.state.rocksdb_handles import (
    RocksListState,
    RocksMapState,
    RocksState,
    RocksValueState,
)
from barrierflow.state.rocksdb_snapshot import (
    RocksDBSnapshot,
    changelog_as_canonical,
    download,
    native_header,
    native_to_canonical,
    parse_section,
    range_of,
)
from barrierflow.state.rocksdb_uploads import (
    SharedUploads,
    restored_files,
)
from barrierflow.state.values import ListState, MapState, ValueState

__all__ = ["RocksDBKeyedStateBackend", "native_to_canonical"]
"""`native_to_canonical` is `rocksdb_snapshot.py`'s, importable from here too."""

_NO_KEY = NO_KEY

# ---- the backend ----------------------------------------------------------------------------


class RocksDBKeyedStateBackend(KeyScope):
    """Keyed state of one subtask's key-group range in its own RocksDB (module docstring).

    `local_dir` is a folder on the task host's local disk; the backend makes its own
    subfolder there and deletes it on `dispose()`. Mailbox thread only, except a
    snapshot's `write`, which reads only the snapshot's own native checkpoint.
    """

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        settings: EmbeddedRocksDBStateBackend,
        local_dir: str,
    ) -> None:
        if not 1 <= max_parallelism <= MAX_KEY_GROUPS or key_group_range.end >= max_parallelism:
            raise ConfigurationError(
                f"key-group range {key_group_range} does not fit max parallelism "
                f"{max_parallelism} (the RocksDB backend takes at most {MAX_KEY_GROUPS})"
            )
        super().__init__(key_group_range, max_parallelism)
        self._settings = settings
        os.makedirs(local_dir, exist_ok=True)
        self._dir = tempfile.mkdtemp(
            prefix=f"rocksdb-kg{key_group_range.start}-{key_group_range.end}-", dir=local_dir
        )
        self._db_path = os.path.join(self._dir, "db")
        self._db = Rdict(self._db_path, db_options(settings))
        self._db.set_write_options(write_options())
        self._written = False
        """Whether anything was written (a restore may then no longer adopt native files)."""
        self._key_part: bytes | None = None
        """The current key's encoding in a RocksDB key, made at its first use."""
        self._cache_key: Any = None
        """The current key's key in the value states' caches (`rocksdb_cache.cache_key`),
        set with the key when it is a str or int, else made at its first use."""
        self._write_cache_entries: int = settings.write_cache_entries
        self._value_states: list[RocksValueState] = []
        """The states with a write-back cache; they share `write_cache_entries`."""
        self._names: list[str] = []
        """State names; a state's id in its RocksDB keys is its position here."""
        self._states: dict[str, RocksState] = {}
        self._filters: dict[str, Callable[[Any], Any]] = {}
        """Per state, what savepoints write instead of each value (`set_snapshot_filter`)."""
        self._checkpoints = itertools.count(1)
        self._uploads = SharedUploads() if settings.enable_incremental_checkpointing else None
        """Incremental checkpoints: what is in the job's shared folder (`rocksdb_uploads`)."""
        self._disposed = False

    # ---- the current key (hot path) --------------------------------------------------------

    def set_current_key(self, key: Any) -> None:
        """Scope every state to `key` until the next call."""
        index = stable_hash(key) % self.max_parallelism - self._start
        if index < 0 or index >= self._count:
            self._routing_error(key, index + self._start)
        self._current_key = key
        self._current_index = index
        self._key_part = None
        cls = type(key)
        self._cache_key = key if cls is str or cls is int else None

    def _encode_current_key(self) -> bytes:
        """The current key's part of a RocksDB key, with the heap backend's errors."""
        key = self._current_key
        if key is _NO_KEY:
            raise ConfigurationError("keyed state was used before set_current_key()")
        try:
            part = key_part(key)
        except TypeError as error:
            raise unhashable_key(key) from error
        except Exception as error:
            raise ConfigurationError(
                f"key {key!r:.200} of type {type(key).__qualname__} cannot be pickled, so the "
                f"RocksDB state backend cannot store state for it: {error}"
            ) from error
        self._key_part = part
        return part

    def _current_cache_key(self) -> Any:
        """The current key's cache key (`rocksdb_cache.cache_key`), with the errors of
        `_encode_current_key`."""
        key = self._current_key
        cls = type(key)
        if cls is bool or (cls is float and key.is_integer()):
            cached: Any = int(key)
        else:
            cached = self._key_part or self._encode_current_key()
        self._cache_key = cached
        return cached

    # ---- the write-back caches ---------------------------------------------------------------

    def flush_writes(self) -> None:
        """Write every value state's cached writes to RocksDB (before the database is read
        directly: a snapshot, a restore)."""
        for state in self._value_states:
            state.flush()

    @property
    def prefetches(self) -> bool:  # type: ignore[override]
        """Whether a value state with a write-back cache exists (what `prefetch` fills)."""
        return self._write_cache_entries > 0 and bool(self._value_states)

    def prefetch(self, keys: Sequence[Any]) -> None:
        """Read the value of every key of `keys` that a value state's cache lacks, one
        multi-get per state, into the cache (clean), so the batch's records then hit it.
        A key already cached is left alone: its cached value may be a write RocksDB does
        not have yet. Keys outside this backend's key groups, or that cannot be encoded,
        are skipped (their `set_current_key` / `value()` raises as without a prefetch)."""
        states = self._value_states
        if not states or self._write_cache_entries <= 0:
            return
        wanted: dict[Any, tuple[int, Any]] = {}
        """cache key -> (key-group index, the key): each distinct key once."""
        max_p, start, count = self.max_parallelism, self._start, self._count
        for key in keys:
            cls = type(key)
            if cls is str or cls is int:
                cached = key
            else:
                try:
                    cached = cache_key(key)
                except Exception:  # the record's own value() names the problem
                    continue
            if cached in wanted:
                continue
            try:
                index = stable_hash(key) % max_p - start
            except Exception:
                continue
            if 0 <= index < count:
                wanted[cached] = (index, key)
        if wanted:
            for state in states:
                state.prefetch(wanted)

    def _forget_cached(self) -> None:
        """Flush and forget every cached value (the database is about to change under the
        caches: a restore)."""
        for state in self._value_states:
            state.flush()
            state._cache.drop()
            state._fetched = {}

    # ---- registering states ----------------------------------------------------------------

    def get_value_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        """The `ValueState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ValueStateDescriptor, RocksValueState)  # type: ignore[return-value]

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """The `ListState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ListStateDescriptor, RocksListState)  # type: ignore[return-value]

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        """The `MapState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, MapStateDescriptor, RocksMapState)  # type: ignore[return-value]

    def _state(
        self,
        descriptor: StateDescriptor,
        expected: type[StateDescriptor],
        implementation: type[RocksState],
    ) -> RocksState:
        name = self._declared(descriptor, expected)
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = implementation(self, name, self._names.index(name))
            if isinstance(state, RocksValueState):
                self._value_states.append(state)
                limit = self._write_cache_entries // len(self._value_states)
                for each in self._value_states:
                    each._cache.limit = limit
        return state

    def _kind_of(self, name: str, kind: StateKind) -> StateKind:
        """The kind `name` has (registering it with `kind` if it is new)."""
        known = self._kinds.get(name)
        if known is None:
            if len(self._names) >= 1 << 16:
                raise ConfigurationError("the RocksDB state backend holds at most 65536 states")
            self._kinds[name] = known = kind
            self._names.append(name)
        return known

    def _state_id(self, name: str) -> int | None:
        return self._names.index(name) if name in self._kinds else None

    def keys(self, state_name: str) -> Iterator[Any]:
        """Every key with a value in state `state_name` (none if it is unknown), per key group
        in byte order. Safe while changing the state: each key group's keys are read before
        they are yielded."""
        state_id = self._state_id(state_name)
        if state_id is None:
            return
        state = self._states.get(state_name)
        cached = state if isinstance(state, RocksValueState) else None
        for key_group in self.key_group_range:
            if cached is not None:
                cached.flush()  # writes made while iterating included
            prefix = state_prefix(key_group, state_id)
            found: list[bytes] = []
            for db_key in keys_with_prefix(self._db, prefix):
                encoded, _ = split_key_part(db_key)
                if not found or found[-1] != encoded:
                    found.append(encoded)
            for encoded in found:
                yield decode_key(encoded)

    # ---- snapshot and restore --------------------------------------------------------------

    def set_snapshot_filter(self, state_name: str, transform: Callable[[Any], Any] | None) -> None:
        """Savepoints (`write(None)`) taken from now on write `transform(value)` for each
        value of `state_name`, leaving out keys where it returns None; None removes the
        filter. Checkpoints upload the native files as they are (TTL: expired entries there
        are filtered when read, and dropped on restore through a savepoint)."""
        if transform is None:
            self._filters.pop(state_name, None)
        else:
            self._filters[state_name] = transform

    def snapshot(
        self, checkpoint_id: int | None = None, savepoint: bool = False
    ) -> RocksDBSnapshot:
        """Flush the memtable and take RocksDB's native checkpoint (hard links): the
        synchronous part (the same for a savepoint, whose write reads it whole).
        `checkpoint_id` lets an incremental checkpoint's files be reused once it
        completes. Raises OSError if the local disk fails."""
        path = os.path.join(self._dir, f"chk-{next(self._checkpoints)}")
        try:
            self.flush_writes()
            self._db.flush(True)
            Checkpoint(self._db).create_checkpoint(path)
        except Exception as error:
            shutil.rmtree(path, ignore_errors=True)
            raise OSError(
                f"RocksDB could not take a local checkpoint in {path}: {error}"
            ) from error
        return RocksDBSnapshot(
            path,
            self._settings,
            native_header(
                self.max_parallelism,
                self.key_group_range,
                [(name, self._kinds[name]) for name in self._names],
            ),
            [self._filters.get(name) for name in self._names],
            self._uploads,
            checkpoint_id,
        )

    def restore(self, snapshots: Iterable[bytes], base: _fs.Location | None = None) -> None:
        """Add the key groups of this backend's range from canonical or native sections
        (protocol docstring). One native section covering the whole range into a backend
        nothing was written to becomes the database itself (its files downloaded, the key
        groups outside the range deleted); otherwise entries are copied in batches."""
        parsed = [parse_section(changelog_as_canonical(data, base)) for data in snapshots]
        self._forget_cached()
        # A native section of other key groups only is not downloaded; its header is still
        # checked and its states registered, as the heap backend does.
        useful = [
            section
            for section in parsed
            if section[0] == KEYED_STATE
            or len(range_of(section[1]).intersection(self.key_group_range))
        ]
        fresh = not self._written and not self._names
        if fresh and len(useful) == 1 and useful[0][0] == NATIVE_KIND:
            header = useful[0][1]
            old = range_of(header)
            if old.start <= self._start and self.key_group_range.end <= old.end:
                states = self._restored_states(header)  # first: its state ids become ours
                for section in parsed:
                    self._restored_states(section[1])
                self._adopt(header, states, base)
                return
        checked = [self._restored_states(section[1]) for section in parsed]
        restored: set[int] = set()
        for (kind, header, body), states in zip(parsed, checked, strict=True):
            if kind == KEYED_STATE:
                self._restore_canonical(header, body, states, restored)
            else:  # downloads nothing for a section of other key groups only
                self._restore_native(header, states, base, restored)

    def _claim(self, key_group: int, restored: set[int]) -> None:
        if key_group in restored:
            raise StateRestoreError(f"key group {key_group} appears in two keyed-state snapshots")
        restored.add(key_group)

    def _restore_canonical(
        self,
        header: dict[str, Any],
        body: memoryview,
        states: list[tuple[str, StateKind]],
        restored: set[int],
    ) -> None:
        try:
            key_groups = {int(g): (int(o), int(n)) for g, (o, n) in header["key_groups"].items()}
        except (KeyError, TypeError, ValueError) as error:
            raise StateRestoreError(f"malformed keyed-state header: {error!r}") from error
        names = [name for name, _ in states]
        ids = [self._names.index(name) for name in names]
        batch = Batcher(self._db)
        for key_group, (offset, length) in sorted(key_groups.items()):
            if key_group not in self.key_group_range:
                continue
            self._claim(key_group, restored)
            per_state = decode_key_group(body, key_group, offset, length, names)
            for (name, kind), state_id, entries in zip(states, ids, per_state, strict=True):
                if not isinstance(entries, dict):
                    raise StateRestoreError(
                        f"key group {key_group} holds a {type(entries).__name__} for state "
                        f"{name!r} instead of a dict"
                    )
                prefix = state_prefix(key_group, state_id)
                for key, value in entries.items():
                    _put_canonical(batch, prefix, name, kind, key, value)
        batch.finish()
        self._written = True

    def _adopt(
        self, header: dict[str, Any], states: list[tuple[str, StateKind]], base: _fs.Location | None
    ) -> None:
        """Make a native checkpoint covering this range the database, clipped to the range."""
        folder = os.path.join(self._dir, f"restore-{uuid.uuid4().hex[:8]}")
        download(header, base, folder)
        self._db.close()
        Rdict.destroy(self._db_path, db_options(self._settings))
        shutil.rmtree(self._db_path, ignore_errors=True)
        os.replace(folder, self._db_path)
        try:
            self._db = Rdict(self._db_path, db_options(self._settings))
        except Exception as error:
            raise StateRestoreError(
                f"the downloaded RocksDB checkpoint cannot be opened: {error}"
            ) from error
        self._db.set_write_options(write_options())
        if self._uploads is not None and base is not None:
            self._uploads.restored(*restored_files(header, base))
        old = range_of(header)
        if old.start < self._start:
            self._db.delete_range(key_group_prefix(old.start), key_group_prefix(self._start))
        if old.end > self.key_group_range.end:
            self._db.delete_range(
                key_group_prefix(self.key_group_range.end + 1), key_group_prefix(old.end + 1)
            )
        self._written = True

    def _restore_native(
        self,
        header: dict[str, Any],
        states: list[tuple[str, StateKind]],
        base: _fs.Location | None,
        restored: set[int],
    ) -> None:
        """Copy the in-range entries of a native checkpoint, its state ids mapped to ours."""
        both = range_of(header).intersection(self.key_group_range)
        if not len(both):
            return
        for key_group in both:
            self._claim(key_group, restored)
        ids = [struct.pack(">H", self._names.index(name)) for name, _ in states]
        folder = os.path.join(self._dir, f"restore-{uuid.uuid4().hex[:8]}")
        try:
            download(header, base, folder)
            source = open_read_only(folder, self._settings)
            try:
                batch = Batcher(self._db)
                end = key_group_prefix(both.end + 1)
                for db_key, value in source.items(from_key=key_group_prefix(both.start)):
                    if db_key >= end:
                        break
                    _, state_id = split_prefix(db_key)
                    if state_id >= len(ids):
                        raise StateRestoreError(
                            f"a RocksDB checkpoint holds state id {state_id}, its header names "
                            f"{len(ids)} states: the checkpoint is damaged"
                        )
                    batch.put(db_key[:2] + ids[state_id] + db_key[PREFIX_BYTES:], value)
                batch.finish()
            finally:
                source.close()
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self._written = True

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Incremental: the checkpoint's shared files may be referenced from now on."""
        if self._uploads is not None:
            self._uploads.complete(checkpoint_id)

    def dispose(self) -> None:
        """Close the database and delete its local folder (with any local checkpoints)."""
        if self._disposed:
            return
        self._disposed = True
        with contextlib.suppress(Exception):
            self._db.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _put_canonical(
    batch: Batcher, prefix: bytes, name: str, kind: StateKind, key: Any, value: Any
) -> None:
    """Write one canonical entry (a key's value, list or dict) of state `name`."""
    try:
        part = prefix + key_part(key)
        if kind is StateKind.VALUE:
            if value is not None:
                batch.put(part, encode_value(value))
        elif kind is StateKind.LIST:
            if value:
                batch.put(part, encode_list(value))
        else:
            for map_key, map_value in value.items():
                batch.put(part + encode_key(map_key), encode_value(map_value))
    except (TypeError, AttributeError, pickle.PicklingError) as error:
        raise StateRestoreError(
            f"state {name!r} of key {key!r:.200} cannot be restored into RocksDB: {error}"
        ) from error
