"""The keyed state backend protocol: what operators may ask of keyed state, whatever holds it.

Operators depend on this protocol only; `barrierflow.state.backends.create_keyed_backend`
builds the job's configured backend (`env.set_state_backend(...)`): the heap backend
(`heap_backend.py`, Python dicts) or the on-disk one (`rocksdb_backend.py`, an embedded
RocksDB). Mailbox thread only, except a snapshot's `write`, which runs on the uploader
thread.

Namespaces: a state scoped to a key and a namespace (a window) is a map state whose map
key is the namespace (`runtime/windowing/partitioned_state.py` builds typed handles over
it), so every backend stores window contents, per-window user state and merging-window
sets as map entries (on disk: key group, key, state, namespace, one contiguous range per
key group).

A snapshot has two parts, as in Flink: `snapshot()` is the synchronous part, called at
the barrier on the mailbox thread, and must take no longer than a few milliseconds
whatever the state size (a copy-on-write view, the store's native checkpoint); its
`write(...)` is the asynchronous part (serialization, uploads), run on the uploader
thread while records keep flowing. Savepoints ask `write(None)`: the canonical
"keyed-state" envelope of `heap_backend.py` (documented in `docs/savepoint-format.md`),
which every backend restores, so a job switches backends through a savepoint; a
checkpoint's `write(folder)` may instead name native files it uploaded into `folder`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from barrierflow import _fs
    from barrierflow.core.state_descriptors import (
        ListStateDescriptor,
        MapStateDescriptor,
        ValueStateDescriptor,
    )
    from barrierflow.state.key_groups import KeyGroupRange
    from barrierflow.state.values import ListState, MapState, ValueState


class KeyedStateSnapshot(Protocol):
    """The synchronous part of one keyed snapshot, held until the uploader writes it."""

    def write(
        self,
        side_files: _fs.Location | None,
        shared: _fs.Location | None = None,
        final: bool = False,
    ) -> bytes:
        """Serialize (and upload what does not go inline) on the uploader thread.

        Returns the keyed section of the subtask state file. `side_files` None (a
        savepoint): the canonical "keyed-state" envelope. Otherwise a backend may return
        its own envelope naming files it wrote below `side_files` (a folder of this
        checkpoint, discarded with it), by names relative to the checkpoint's folder.
        `shared` (checkpoints only: the job folder's `shared/`) is where an incremental
        backend puts files later checkpoints may reference too (`shared_files`). `final`:
        the job's final checkpoint, which only a failure before the job ends restores (a
        changelog backend writes a delta, never a new base).
        Raises OSError when storage fails (the checkpoint is declined) and
        ConfigurationError for a value that cannot be serialized.
        """
        ...

    def shared_files(self) -> list[tuple[str, int, bool]]:
        """After `write`: every shared file the section references, as (name relative to
        the job folder, size, uploaded by this write). [] for backends without any."""
        return []

    def side_file_bytes(self) -> int:
        """After `write`: the bytes it wrote into `side_files` (0 for backends without
        any), counted in the checkpoint's state size and uploaded size."""
        return 0

    def release(self) -> None:
        """Free what the snapshot holds (a copy-on-write version, a native checkpoint's
        hard links); called after `write`, or instead of it when the checkpoint is dropped."""
        ...


class KeyedStateBackend(Protocol):
    """Keyed state of one subtask's key-group range (see the module docstring)."""

    key_group_range: KeyGroupRange
    max_parallelism: int

    def set_current_key(self, key: Any) -> None:
        """Scope every state to `key` until the next call (StreamCorruptionError if the
        key is outside this backend's key groups)."""
        ...

    @property
    def current_key(self) -> Any:
        """The key set last, or None before the first `set_current_key`."""
        ...

    @property
    def current_key_group(self) -> int | None:
        """The key group of the current key, or None before the first `set_current_key`."""
        ...

    prefetches: bool
    """Whether `prefetch` is worth calling: True for a backend whose reads cost a store
    lookup (the on-disk one), False where `prefetch` does nothing (the heap)."""

    def prefetch(self, keys: Sequence[Any]) -> None:
        """Bring the value state of `keys`, the keys of a batch about to be processed record
        by record, into memory in one multi-get, so each record's `value()` finds it there.
        Only a hint: what is read afterwards is exactly what it would be without the call
        (a key written since, or outside the key groups, is left alone)."""
        ...

    def get_value_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        """The `ValueState` named by `descriptor` (the same object on every call)."""
        ...

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """The `ListState` named by `descriptor` (the same object on every call)."""
        ...

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        """The `MapState` named by `descriptor` (the same object on every call)."""
        ...

    def keys(self, state_name: str) -> Iterator[Any]:
        """Every key with a value in state `state_name`; safe while changing the state."""
        ...

    def set_snapshot_filter(self, state_name: str, transform: Callable[[Any], Any] | None) -> None:
        """Let snapshots write `transform(value)` for each key's value of `state_name` and
        leave the key out where it returns None (TTL's full-snapshot cleanup,
        `state/ttl.py`); None removes the filter. The value is what the state stores per
        key (a value state's value, a list state's list, a map state's dict); live state
        is never changed. `transform` must not change its argument and may run on the
        uploader thread. A backend that snapshots native files (the on-disk backend's
        checkpoints) applies it to savepoints (`write(None)`) only."""
        ...

    def snapshot(
        self, checkpoint_id: int | None = None, savepoint: bool = False
    ) -> KeyedStateSnapshot:
        """The synchronous part of a snapshot of every state (see the module docstring);
        `checkpoint_id` (None outside checkpoints) is the one `notify_checkpoint_complete`
        later names (an incremental backend reuses a completed checkpoint's files);
        `savepoint`: the snapshot is written whole (`write(None)`)."""
        ...

    def restore(self, snapshots: Iterable[bytes], base: _fs.Location | None = None) -> None:
        """Add the key groups of this backend's range from keyed sections written by any
        backend's snapshot (others are skipped); `base` is the folder of the checkpoint
        they were read from, against which native file names resolve. StateRestoreError
        for damage, another max parallelism, a key group in two snapshots, or a state
        restored as another kind."""
        ...

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` completed (an incremental backend may reference the
        files it uploaded for it from now on; the backend is not told of aborts)."""
        ...

    def dispose(self) -> None:
        """Free everything (close the store, delete its local folder); the backend is
        unusable afterwards. Called when the operator closes or its attempt is aborted."""
        ...


def canonical_bytes(backend: KeyedStateBackend) -> bytes:
    """A canonical "keyed-state" snapshot of `backend`, taken and written now (tests, the
    state processor, operators that keep their state outside the backend)."""
    snapshot = backend.snapshot()
    try:
        return snapshot.write(None)
    finally:
        snapshot.release()


def canonical_section(keyed: bytes | KeyedStateSnapshot) -> bytes:
    """An operator snapshot's keyed part as canonical bytes: bytes as they are, a
    `KeyedStateSnapshot` written now with `write(None)` and released (tests, tools)."""
    if isinstance(keyed, bytes):
        return keyed
    try:
        return keyed.write(None)
    finally:
        keyed.release()
