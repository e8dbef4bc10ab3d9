"""The on-disk keyed state backend: keyed state in an embedded RocksDB (through `rocksdict`).

State may outgrow memory: RocksDB keeps it in files on the task host's local disk and
holds only its block cache and memtables in memory, both shared by every backend of a
task process and bounded by `EmbeddedRocksDBStateBackend.block_cache_mb` and
`write_buffer_mb` (see `_shared_memory`). One database per backend (subtask and operator),
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
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rocksdict import (
    AccessType,
    BlockBasedIndexType,
    BlockBasedOptions,
    Cache,
    Checkpoint,
    DBCompressionType,
    Options,
    Rdict,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from barrierflow import _envelope, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.core.state_descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state.batched import key_group_indices
from barrierflow.state.heap_backend import KEYED_STATE, decode_key_group, filtered
from barrierflow.state.key_groups import KeyGroupRange, stable_hash
from barrierflow.state.key_scope import (
    KEYED_STATE_VERSION,
    NO_KEY,
    KeyScope,
    check_keyed_header_version,
)
from barrierflow.state.rocksdb_encoding import (
    MAX_KEY_GROUPS,
    NATIVE_KIND,
    PREFIX_BYTES,
    decode_key,
    decode_list,
    decode_value,
    encode_element,
    encode_key,
    encode_list,
    encode_value,
    key_group_prefix,
    key_part,
    section_kind,
    split_key_part,
    split_prefix,
    state_prefix,
)
from barrierflow.state.rocksdb_uploads import (
    SharedUploads,
    restored_files,
    shared_sources,
    upload_incremental,
)
from barrierflow.state.values import ListState, MapState, ValueState, list_values

NATIVE_VERSION = 1
"""Schema of the native header. Readers take 1 up to this."""

_MB = 1 << 20
_BATCH_ENTRIES = 20_000
"""Entries per WriteBatch when a restore copies state."""

_NO_KEY = NO_KEY


# ---- memory: one block cache and one write buffer manager per task process ----------------

_shared_lock = threading.Lock()
_shared: dict[tuple[int, int], tuple[Cache, WriteBufferManager]] = {}


def _shared_memory(settings: EmbeddedRocksDBStateBackend) -> tuple[Cache, WriteBufferManager]:
    """The process's block cache and write buffer manager for these sizes, made once.

    Every backend of a task process shares them, so RocksDB's memory in a task process is
    about `block_cache_mb` (data, index and filter blocks: index and filter blocks are
    charged to the cache, not held outside it) plus `write_buffer_mb` (memtables, all
    databases together), whatever the state size and the number of subtasks.
    """
    sizes = (settings.block_cache_mb, settings.write_buffer_mb)
    with _shared_lock:
        found = _shared.get(sizes)
        if found is None:
            cache = Cache(settings.block_cache_mb * _MB)
            found = _shared[sizes] = (
                cache,
                WriteBufferManager(settings.write_buffer_mb * _MB, False),
            )
        return found


def _options(settings: EmbeddedRocksDBStateBackend) -> Options:
    cache, write_buffers = _shared_memory(settings)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_bloom_filter(10, False)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    # Partitioned index and filters: a large file's filter is many 4 KiB blocks, not one
    # block of megabytes, which would not fit one shard of the cache (1/64 of it) and be
    # read back for every get (measured: 80-140 us a get instead of ~3).
    table.set_index_type(BlockBasedIndexType.two_level_index_search())
    table.set_partition_filters(True)
    table.set_metadata_block_size(4096)
    table.set_pin_top_level_index_and_filter(True)
    options.set_block_based_table_factory(table)
    options.set_write_buffer_manager(write_buffers)
    # One memtable flushes at a quarter of the process budget (at least 2 MiB): a flush at
    # the barrier writes at most that much.
    options.set_write_buffer_size(max(2 * _MB, settings.write_buffer_mb * _MB // 4))
    options.set_max_write_buffer_number(3)
    # LZ4 on every level, L0 too: a checkpoint uploads what the barrier's flush wrote
    # (uncompressed L0/L1 measured 24 MiB against 9 MiB per full checkpoint at 1 M keys).
    options.set_compression_type(DBCompressionType.lz4())
    options.set_level_compaction_dynamic_level_bytes(True)
    options.set_max_background_jobs(2)
    options.set_keep_log_file_num(2)
    options.set_max_log_file_size(4 * _MB)
    options.set_skip_stats_update_on_db_open(True)
    return options


def _write_options() -> WriteOptions:
    write = WriteOptions()
    write.disable_wal = True
    return write


def _open_read_only(path: str, settings: EmbeddedRocksDBStateBackend) -> Rdict:
    try:
        return Rdict(path, _options(settings), access_type=AccessType.read_only())
    except Exception as error:
        raise StateRestoreError(f"the RocksDB files in {path} cannot be opened: {error}") from error


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
        self._db = Rdict(self._db_path, _options(settings))
        self._db.set_write_options(_write_options())
        self._written = False
        """Whether anything was written (a restore may then no longer adopt native files)."""
        self._key_part: bytes | None = None
        """The current key's encoding in a RocksDB key, made at its first use."""
        self._names: list[str] = []
        """State names; a state's id in its RocksDB keys is its position here."""
        self._states: dict[str, _RocksState] = {}
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

    def _encode_current_key(self) -> bytes:
        """The current key's part of a RocksDB key, with the heap backend's errors."""
        key = self._current_key
        if key is _NO_KEY:
            raise ConfigurationError("keyed state was used before set_current_key()")
        try:
            part = key_part(key)
        except TypeError as error:
            raise ConfigurationError(
                f"keyed state needs a hashable key; key {key!r:.200} is a "
                f"{type(key).__name__}. Return a tuple instead of a list from the key selector"
            ) from error
        except Exception as error:
            raise ConfigurationError(
                f"key {key!r:.200} of type {type(key).__qualname__} cannot be pickled, so the "
                f"RocksDB state backend cannot store state for it: {error}"
            ) from error
        self._key_part = part
        return part

    # ---- registering states ----------------------------------------------------------------

    def get_value_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        """The `ValueState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ValueStateDescriptor, _RocksValueState)  # type: ignore[return-value]

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """The `ListState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ListStateDescriptor, _RocksListState)  # type: ignore[return-value]

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        """The `MapState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, MapStateDescriptor, _RocksMapState)  # type: ignore[return-value]

    def _state(
        self,
        descriptor: StateDescriptor,
        expected: type[StateDescriptor],
        implementation: type[_RocksState],
    ) -> _RocksState:
        name = self._declared(descriptor, expected)
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = implementation(self, name, self._names.index(name))
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
        for key_group in self.key_group_range:
            prefix = state_prefix(key_group, state_id)
            found: list[bytes] = []
            for db_key in _keys_with_prefix(self._db, prefix):
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

    def snapshot(self, checkpoint_id: int | None = None) -> RocksDBSnapshot:
        """Flush the memtable and take RocksDB's native checkpoint (hard links): the
        synchronous part. `checkpoint_id` lets an incremental checkpoint's files be reused
        once it completes. Raises OSError if the local disk fails."""
        path = os.path.join(self._dir, f"chk-{next(self._checkpoints)}")
        try:
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
            _native_header(
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
        parsed = [_parse_section(_changelog_as_canonical(data, base)) for data in snapshots]
        # A native section of other key groups only is not downloaded; its header is still
        # checked and its states registered, as the heap backend does.
        useful = [
            section
            for section in parsed
            if section[0] == KEYED_STATE
            or len(_range_of(section[1]).intersection(self.key_group_range))
        ]
        fresh = not self._written and not self._names
        if fresh and len(useful) == 1 and useful[0][0] == NATIVE_KIND:
            header = useful[0][1]
            old = _range_of(header)
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
        batch = _Batcher(self._db)
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
        _download(header, base, folder)
        self._db.close()
        Rdict.destroy(self._db_path, _options(self._settings))
        shutil.rmtree(self._db_path, ignore_errors=True)
        os.replace(folder, self._db_path)
        try:
            self._db = Rdict(self._db_path, _options(self._settings))
        except Exception as error:
            raise StateRestoreError(
                f"the downloaded RocksDB checkpoint cannot be opened: {error}"
            ) from error
        self._db.set_write_options(_write_options())
        if self._uploads is not None and base is not None:
            self._uploads.restored(*restored_files(header, base))
        old = _range_of(header)
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
        both = _range_of(header).intersection(self.key_group_range)
        if not len(both):
            return
        for key_group in both:
            self._claim(key_group, restored)
        ids = [struct.pack(">H", self._names.index(name)) for name, _ in states]
        folder = os.path.join(self._dir, f"restore-{uuid.uuid4().hex[:8]}")
        try:
            _download(header, base, folder)
            source = _open_read_only(folder, self._settings)
            try:
                batch = _Batcher(self._db)
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


def _range_of(header: dict[str, Any]) -> KeyGroupRange:
    try:
        start, end = header["key_group_range"]
        return KeyGroupRange(int(start), int(end))
    except Exception as error:
        raise StateRestoreError(f"malformed keyed-state header: {error!r}") from error


def _keys_with_prefix(db: Rdict, prefix: bytes) -> list[bytes]:
    """Every RocksDB key starting with `prefix`, in order."""
    found = []
    for db_key in db.keys(from_key=prefix):
        if not db_key.startswith(prefix):
            break
        found.append(db_key)
    return found


def _items_with_prefix(db: Rdict, prefix: bytes) -> list[tuple[bytes, bytes]]:
    found = []
    for db_key, value in db.items(from_key=prefix):
        if not db_key.startswith(prefix):
            break
        found.append((db_key, value))
    return found


class _Batcher:
    """Writes through WriteBatches of `_BATCH_ENTRIES` entries (a restore's copy)."""

    def __init__(self, db: Rdict) -> None:
        self._db = db
        self._batch = WriteBatch(raw_mode=True)
        self._size = 0

    def put(self, key: bytes, value: bytes) -> None:
        self._batch.put(key, value)
        self._size += 1
        if self._size >= _BATCH_ENTRIES:
            self._flush()

    def _flush(self) -> None:
        if self._size:
            self._db.write(self._batch)
            self._batch = WriteBatch(raw_mode=True)
            self._size = 0

    def finish(self) -> None:
        self._flush()


def _put_canonical(
    batch: _Batcher, prefix: bytes, name: str, kind: StateKind, key: Any, value: Any
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


# ---- state handles --------------------------------------------------------------------------


class _RocksState:
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


class _RocksValueState(_RocksState, ValueState):
    __slots__ = ()

    def value(self) -> Any:
        raw = self._backend._db.get(self._db_key())
        return None if raw is None else decode_value(raw)

    def update(self, value: Any) -> None:
        backend = self._backend
        if value is None:
            backend._db.delete(self._db_key())
        else:
            backend._db.put(self._db_key(), self._encode(value))
        backend._written = True

    # batched access (`state/batched.py`): one multi-get, one WriteBatch
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

    def get_many(self, keys: Any, key_groups: Any = None) -> list[Any]:
        if not len(keys):
            return []
        raws = self._backend._db.get(self._db_keys(keys, key_groups))
        return [None if raw is None else decode_value(raw) for raw in raws]

    def put_many(self, keys: Any, values: Any, key_groups: Any = None) -> None:
        if not len(keys):
            return
        batch = WriteBatch(raw_mode=True)
        for db_key, key, value in zip(self._db_keys(keys, key_groups), keys, values, strict=True):
            if value is None:
                batch.delete(db_key)
                continue
            try:
                batch.put(db_key, encode_value(value))
            except Exception as error:
                raise ConfigurationError(
                    f"the value of state {self._name!r} for key {key!r:.200} cannot be "
                    f"pickled, so it cannot be stored in RocksDB: {error}"
                ) from error
        backend = self._backend
        backend._db.write(batch)
        backend._written = True

    def remove_many(self, keys: Any, key_groups: Any = None) -> None:
        if not len(keys):
            return
        batch = WriteBatch(raw_mode=True)
        for db_key in self._db_keys(keys, key_groups):
            batch.delete(db_key)
        backend = self._backend
        backend._db.write(batch)
        backend._written = True


def _bad_key(keys: Any, error: Exception) -> ConfigurationError:
    """A batched access could not encode a key: name it (as `_encode_current_key`)."""
    for key in keys:
        try:
            key_part(key)
        except TypeError:
            return ConfigurationError(
                f"keyed state needs a hashable key; key {key!r:.200} is a "
                f"{type(key).__name__}. Return a tuple instead of a list from the key selector"
            )
        except Exception as failure:
            return ConfigurationError(
                f"key {key!r:.200} of type {type(key).__qualname__} cannot be pickled, so the "
                f"RocksDB state backend cannot store state for it: {failure}"
            )
    return ConfigurationError(f"batched keyed state access failed: {error}")


class _RocksListState(_RocksState, ListState):
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


class _RocksMapState(_RocksState, MapState):
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
        return _items_with_prefix(self._backend._db, self._db_key())

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
        keys = _keys_with_prefix(backend._db, prefix)
        if keys:
            batch = WriteBatch(raw_mode=True)
            for db_key in keys:
                batch.delete(db_key)
            backend._db.write(batch)
        backend._written = True


# ---- snapshots ------------------------------------------------------------------------------


def _native_header(
    max_parallelism: int, key_group_range: KeyGroupRange, states: list[tuple[str, StateKind]]
) -> dict[str, Any]:
    return {
        "version": NATIVE_VERSION,
        "max_parallelism": max_parallelism,
        "key_group_range": [key_group_range.start, key_group_range.end],
        "states": [[name, kind.value] for name, kind in states],
    }


class RocksDBSnapshot:
    """A native RocksDB checkpoint in a local folder (hard links), until `release()`."""

    def __init__(
        self,
        path: str,
        settings: EmbeddedRocksDBStateBackend,
        header: dict[str, Any],
        filters: list[Callable[[Any], Any] | None],
        uploads: SharedUploads | None = None,
        checkpoint_id: int | None = None,
    ) -> None:
        self._path = path
        self._settings = settings
        self._header = header
        self._filters = filters
        self._uploads = uploads
        self._checkpoint_id = checkpoint_id
        self._shared: list[tuple[str, int, bool]] = []
        self._side_file_bytes = 0

    def write(self, side_files: _fs.Location | None, shared: _fs.Location | None = None) -> bytes:
        """Upload the checkpoint's files into `side_files` and return the native envelope
        naming them; `side_files` None: the canonical "keyed-state" envelope."""
        if side_files is None:
            db = _open_read_only(self._path, self._settings)
            try:
                return _canonical(db, self._header, self._filters)
            finally:
                db.close()
        _fs.make_dirs(side_files)
        # LOG*: RocksDB's info log, not state
        names = [name for name in sorted(os.listdir(self._path)) if not name.startswith("LOG")]
        header = dict(self._header)
        if self._uploads is not None and shared is not None:
            header["shared"], self._shared, names = upload_incremental(
                self._path, names, shared, self._uploads, self._checkpoint_id
            )
        files = []
        for name in names:
            size, checksum = _fs.upload_file(os.path.join(self._path, name), side_files.child(name))
            files.append([f"{side_files.name}/{name}", size, checksum])
        self._side_file_bytes = sum(size for _, size, _ in files)
        return _envelope.encode(NATIVE_KIND, {**header, "files": files})

    def shared_files(self) -> list[tuple[str, int, bool]]:
        """After `write`: the files it referenced in the job's shared folder, as (name
        relative to the job folder, size, uploaded by this write); a full upload: none."""
        return list(self._shared)

    def side_file_bytes(self) -> int:
        """After `write`: the bytes of the checkpoint's own files (MANIFEST, OPTIONS and,
        without incremental checkpoints, every SST file) uploaded into `side_files`."""
        return self._side_file_bytes

    def release(self) -> None:
        """Delete the local checkpoint (its hard links)."""
        shutil.rmtree(self._path, ignore_errors=True)


def _changelog_as_canonical(data: bytes, base: _fs.Location | None) -> bytes:
    """A heap backend's changelog manifest as the canonical section (its chain applied,
    `heap_changelog.changelog_to_canonical`); any other section as it is."""
    if section_kind(data) != "heap-changelog":
        return data
    from barrierflow.state.heap_changelog import changelog_to_canonical

    return changelog_to_canonical(data, base)


def _parse_section(data: bytes) -> tuple[str, dict[str, Any], memoryview]:
    """(kind, header, body) of a canonical or native keyed section."""
    view = memoryview(data).cast("B")
    kind = NATIVE_KIND if section_kind(view) == NATIVE_KIND else KEYED_STATE
    header, body = _envelope.decode(view, kind)
    if not isinstance(header, dict):
        raise StateRestoreError(f"a {kind!r} header must be a dict, found {header!r:.200}")
    return kind, header, body


def _download(header: dict[str, Any], base: _fs.Location | None, folder: str) -> None:
    """Download a native section's files from the checkpoint folder `base` into `folder`,
    checking each one's size and CRC-32."""
    if base is None:
        raise StateRestoreError(
            "a native RocksDB checkpoint section was given without the checkpoint folder "
            "its files are in"
        )
    try:
        files = [(str(name), int(size), int(crc)) for name, size, crc in header["files"]]
    except (KeyError, TypeError, ValueError) as error:
        raise StateRestoreError(f"malformed RocksDB checkpoint header: {error!r}") from error
    sources = []
    for name, size, crc in files:
        local_name = name.rsplit("/", 1)[-1]
        if local_name in ("", ".", "..") or name.startswith("/") or ".." in name.split("/"):
            raise StateRestoreError(f"a RocksDB checkpoint names the file {name!r}")
        sources.append((base.child(*name.split("/")), local_name, size, crc))
    sources += shared_sources(header, base)  # incremental: in the job folder's shared/
    os.makedirs(folder)
    for source, local_name, size, crc in sources:
        try:
            found_size, found_crc = _fs.download_file(source, os.path.join(folder, local_name))
        except FileNotFoundError as error:
            raise StateRestoreError(f"the RocksDB checkpoint file {source} is missing") from error
        if (found_size, found_crc) != (size, crc):
            raise StateRestoreError(
                f"damaged RocksDB checkpoint file {source}: {found_size} bytes with CRC-32 "
                f"{found_crc:#010x}, expected {size} bytes with {crc:#010x}"
            )


def _canonical(
    db: Rdict,
    header: dict[str, Any],
    filters: list[Callable[[Any], Any] | None] | None = None,
) -> bytes:
    """The canonical "keyed-state" envelope of a native database (`heap_backend.py`'s
    format, with the content the heap backend writes), each state's values through its
    snapshot filter if it has one."""
    states = [(name, StateKind(kind)) for name, kind in header["states"]]
    names = [name for name, _ in states]
    sections: list[bytes] = []
    index: dict[int, list[int]] = {}
    offset = 0
    current_group = -1
    per_state: list[dict[Any, Any]] = []

    def close_group() -> None:
        nonlocal offset, per_state
        if current_group < 0:
            return
        if filters:
            per_state = [
                filtered(entries, transform)
                for entries, transform in zip(per_state, filters, strict=True)
            ]
        if not any(per_state):
            return
        try:
            section = pickle.dumps(per_state, protocol=5)
        except Exception as error:
            raise ConfigurationError(f"keyed state cannot be pickled: {error}") from error
        index[current_group] = [offset, len(section)]
        sections.append(section)
        offset += len(section)

    try:
        for db_key, value in db.items():
            key_group, state_id = split_prefix(db_key)
            if key_group != current_group:
                close_group()
                current_group = key_group
                per_state = [{} for _ in states]
            kind = states[state_id][1]
            encoded, end = split_key_part(db_key)
            key = decode_key(encoded)
            if kind is StateKind.VALUE:
                per_state[state_id][key] = decode_value(value)
            elif kind is StateKind.LIST:
                per_state[state_id][key] = decode_list(value)
            else:
                per_state[state_id].setdefault(key, {})[decode_key(db_key[end:])] = decode_value(
                    value
                )
    except (IndexError, struct.error, pickle.UnpicklingError, UnicodeDecodeError) as error:
        raise StateRestoreError(
            f"RocksDB state ({', '.join(names)}) is damaged: {error!r}"
        ) from error
    close_group()
    canonical = {
        "version": KEYED_STATE_VERSION,
        "max_parallelism": header["max_parallelism"],
        "key_group_range": list(header["key_group_range"]),
        "states": [[name, kind.value] for name, kind in states],
        "key_groups": index,
    }
    return _envelope.encode(KEYED_STATE, canonical, b"".join(sections))


def native_to_canonical(
    section: bytes | memoryview,
    base: _fs.Location | None,
    settings: EmbeddedRocksDBStateBackend | None = None,
) -> bytes:
    """The canonical "keyed-state" envelope of a keyed section: a native one's files are
    downloaded from the checkpoint folder `base` into a temporary folder and read; a
    canonical one is returned as it is. StateRestoreError for damage."""
    kind, header, _ = _parse_section(bytes(section))
    if kind == KEYED_STATE:
        return bytes(section)
    check_keyed_header_version(header)
    settings = settings or EmbeddedRocksDBStateBackend()
    folder = tempfile.mkdtemp(prefix="barrierflow-rocksdb-read-")
    try:
        _download(header, base, os.path.join(folder, "db"))
        db = _open_read_only(os.path.join(folder, "db"), settings)
        try:
            return _canonical(db, header)
        finally:
            db.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
