"""The heap keyed state backend: keyed state in dicts, one dict per state and key group.

Mailbox thread only, except a snapshot's `write` and `release` (the uploader thread).
State lives as `tables[state name].live[key group - start][key]`, so a value read or
write is a list index and a dict operation, and a snapshot or a restore handles whole
key groups, which is what lets state be rescaled.

Asynchronous snapshots, by copy-on-write per key group (the idea of Flink's
`CopyOnWriteStateMap`): `snapshot()` keeps a reference to every non-empty key group's
dict of every state and marks those dicts shared, in O(key groups x states), touching
no value. The first write to a shared key group afterwards copies that one dict
(shallow: one key group's entries) and writes the copy; the first read of a value
that could be changed in place (a list state's list, a map state's dict, a mutable
value) while a snapshot holds it hands out a copy of its own (a pickle round trip:
what a restore would give), stored in its place; numbers, strings, bytes and tuples of
them are handed out as they are. So the snapshot keeps exactly the state at the
barrier, whatever is done afterwards, while `write` pickles it on the uploader thread.
Several snapshots may be in flight, each holding its own version; once every snapshot
holding a key group is released, the next access drops the sharing without a copy, and
the old dicts go with the snapshots.

Snapshot format: a "keyed-state" envelope (`barrierflow._envelope`).
Its msgpack header is

    {"version": 1,                         # KEYED_STATE_VERSION
     "max_parallelism": 128,
     "key_group_range": [start, end],      # of the backend that wrote it
     "states": [[name, kind], ...],        # kind: "value", "list" or "map"
     "key_groups": {key_group: [offset, length], ...}}

and the body holds one section per non-empty key group, at its (offset, length):
a pickle (protocol 5) of a list with one dict per entry of "states", mapping user
keys to values (value state: the value; list state: a list; map state: a dict).
Pickle holds only user keys and values; restore unpickles only the sections of
key groups in the restoring backend's range. The heap backend writes no side files:
a checkpoint's `write(folder)` is the same envelope as a savepoint's `write(None)`,
unless changelog checkpoints are on (`changelog=True`, `heap_changelog.py`): then the
state handles add the keys they change to per-key-group dirty sets (`StateTable.dirty`),
and a checkpoint's `write(folder, shared)` uploads only a delta into `shared`.

>>> from barrierflow.state import ValueStateDescriptor
>>> from barrierflow.state.backend import canonical_bytes
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> count = backend.get_value_state(ValueStateDescriptor("count"))
>>> for word in ["a", "b", "a"]:
...     backend.set_current_key(word)
...     count.update((count.value() or 0) + 1)
>>> restored = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> restored.restore([canonical_bytes(backend)])
>>> restored.set_current_key("a")
>>> restored.get_value_state(ValueStateDescriptor("count")).value()
2
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable, Container, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from barrierflow import _envelope as state_format
from barrierflow.core.state_descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state.heap_sections import MARSHAL_TAG, decode_section, encode_section
from barrierflow.state.heap_tables import (
    TRACKED,
    HeapListState,
    HeapMapState,
    HeapState,
    HeapValueState,
    SharedGroup,
    StateTable,
    changed_entries,
    note_map_values,
)
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.key_scope import (
    KEYED_STATE_VERSION,
    NO_KEY,
    KeyScope,
    unhashable_key,
)
from barrierflow.state.rocksdb_encoding import NATIVE_KIND, section_kind
from barrierflow.state.values import ListState, MapState, ValueState

if TYPE_CHECKING:
    from barrierflow import _fs
    from barrierflow.state.heap_changelog import (
        Chain,
        DirtyEntries,
        DirtyKeys,
        DirtyLog,
        Pending,
    )

KEYED_STATE = "keyed-state"
"""Envelope kind of a keyed-state snapshot."""

_NO_KEY = NO_KEY

_EMPTY: dict[Any, Any] = {}
"""What a snapshot holds for a key group that was empty when it was taken (never changed)."""


YOUNG_THRESHOLD = 1_000_000
"""The young generation's collection threshold while a heap snapshot is held (`_GcWhileHeld`):
above the net container allocations of a few seconds of records, so none starts while a
snapshot is out (bounds what cyclic garbage may wait: about 1 M objects)."""


class _GcWhileHeld:
    """Raises the young generation's collection threshold while any heap snapshot is held.

    CPython counts young objects net: allocations minus frees of container objects. A
    task that replaces each value by a new tuple frees one per record, so the count stays
    near 0 and no collection runs (the young list grows, unexamined; a stream task's
    process keeps input batches below the threshold too: `young_gc.py`). While a snapshot
    holds the old values every update is a net allocation, so collections start, and the
    first one walks every tuple made since the last: measured up to 0.3 s in the barrier
    at 500 k keys, and about a fifth of the records' time with 1 s checkpoints. With the
    threshold above what a snapshot's lifetime allocates, nothing starts while it is
    held; its release frees the old values, which brings the count back down, so the
    task goes on as without checkpoints. Cycles are collected later, not never.
    Process-wide (the gc is); restored by the last release; a threshold
    already higher (or gc disabled) is left alone.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held = 0
        self._saved: tuple[int, int, int] | None = None

    def hold(self) -> None:
        with self._lock:
            if self._held == 0:
                saved = gc.get_threshold()
                if 0 < saved[0] < YOUNG_THRESHOLD:
                    gc.set_threshold(YOUNG_THRESHOLD, saved[1], saved[2])
                    self._saved = saved
            self._held += 1

    def release(self) -> None:
        with self._lock:
            self._held -= 1
            if self._held == 0 and self._saved is not None:
                if gc.get_threshold()[0] == YOUNG_THRESHOLD:  # nobody changed it meanwhile
                    gc.set_threshold(*self._saved)
                self._saved = None


GC_WHILE_HELD = _GcWhileHeld()


class HeapKeyedStateBackend(KeyScope):
    """Keyed state of one subtask's key-group range, held in memory.

    Guarantees: a snapshot holds the state as it was when `snapshot()` returned
    (later updates, in-place changes of values read afterwards, new keys and clears do
    not change it; see the module docstring), and `restore` keeps exactly the key
    groups of this backend's range, so snapshots taken at one parallelism restore into
    another. Assumes records were routed by `stable_hash` over the same
    `max_parallelism`: a key outside the range is a StreamCorruptionError.

    Values are stored by reference: a value read from `ValueState` (or `MapState`) and
    mutated in place changes the state without `update()` (as in Flink's heap
    backend). While a snapshot holds a key's value, reading it hands out a copy that
    replaces it in the state (as Flink's heap backend copies a mutable value on access),
    so mutating what was read after the barrier never reaches the snapshot. Hence: do
    not keep a value read from state across records (read it again), nor change an
    object in place after passing it to `update()` except through a value read again.
    """

    def __init__(
        self, key_group_range: KeyGroupRange, max_parallelism: int, changelog: bool = False
    ) -> None:
        if max_parallelism < 1 or key_group_range.end >= max_parallelism:
            raise ConfigurationError(
                f"key-group range {key_group_range} does not fit max parallelism {max_parallelism}"
            )
        super().__init__(key_group_range, max_parallelism)
        self._tables: dict[str, StateTable] = {}
        self._states: dict[str, HeapState] = {}
        self._filters: dict[str, Callable[[Any], Any]] = {}
        """Per state, what snapshots write instead of each value (`set_snapshot_filter`)."""
        self._changelog: DirtyLog | None = None
        """Changelog checkpoints (`heap_changelog.py`): what the next delta holds."""
        if changelog:
            from barrierflow.state.heap_changelog import DirtyLog

            self._changelog = DirtyLog()

    def _explain_key_error(self, error: TypeError) -> None:
        """A dict operation failed: raise a clear error if the key is missing or unhashable."""
        if self._current_key is _NO_KEY:
            raise ConfigurationError("keyed state was used before set_current_key()") from error
        try:
            hash(self._current_key)
        except TypeError:
            raise unhashable_key(self._current_key) from error

    # ---- registering states ----------------------------------------------------------------

    def get_value_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        """The `ValueState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ValueStateDescriptor, HeapValueState)  # type: ignore[return-value]

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """The `ListState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ListStateDescriptor, HeapListState)  # type: ignore[return-value]

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        """The `MapState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, MapStateDescriptor, HeapMapState)  # type: ignore[return-value]

    def _state(
        self,
        descriptor: StateDescriptor,
        expected: type[StateDescriptor],
        implementation: type[HeapState],
    ) -> HeapState:
        name = self._declared(descriptor, expected)
        state = self._states.get(name)
        if state is not None:
            return state
        table = self._tables.get(name)
        if table is None:
            table = self._tables[name] = StateTable(
                self._count, self._changelog is not None, maps=implementation is HeapMapState
            )
        if table.dirty is not None:
            implementation = TRACKED[implementation]
        state = self._states[name] = implementation(self, table)
        return state

    def keys(self, state_name: str) -> Iterator[Any]:
        """Every key with a value in state `state_name` (none if it is unknown).

        Safe to use while changing the state: each key group's keys are copied
        before they are yielded.
        """
        table = self._tables.get(state_name)
        if table is None:
            return
        for index in range(self._count):
            yield from list(table.live[index])

    # ---- snapshot and restore --------------------------------------------------------------

    def set_snapshot_filter(self, state_name: str, transform: Callable[[Any], Any] | None) -> None:
        """Snapshots taken from now on write `transform(value)` for each value of
        `state_name`, leaving out keys where it returns None; None removes the filter.
        Applied by `write` (uploader thread) to the snapshot's own version."""
        if transform is None:
            self._filters.pop(state_name, None)
        else:
            self._filters[state_name] = transform

    def snapshot(
        self, checkpoint_id: int | None = None, savepoint: bool = False
    ) -> HeapKeyedStateSnapshot:
        """The synchronous part of a snapshot of every state: a reference to each non-empty
        key group's dict, which stays as it is now (copy-on-write, see the module
        docstring). O(key groups x states); serialized by its `write`. With changelog
        checkpoints, a checkpoint certain to be written as a delta (`DirtyLog.delta_reads`)
        holds only the key groups and values its delta reads; a savepoint holds all."""
        GC_WHILE_HELD.hold()  # first: the snapshot's own allocations must not start a collection
        names = list(self._tables)
        snapshot = HeapKeyedStateSnapshot(
            self.key_group_range,
            self.max_parallelism,
            [(name, self._kinds[name]) for name in names],
            [self._filters.get(name) for name in names],
        )
        snapshot._gc_hold = weakref.finalize(snapshot, GC_WHILE_HELD.release)
        wanted: Callable[[str, int], list[Container[Any]] | None] = _every_key
        if self._changelog is not None and checkpoint_id is not None:
            live = sum(len(entries) for table in self._tables.values() for entries in table.live)
            dirty, entries = self._swap_dirty()
            snapshot._changelog = self._changelog.snapshot(checkpoint_id, dirty, live, entries)
            delta_reads = None if savepoint else self._changelog.delta_reads()
            if delta_reads is not None:
                snapshot.delta_only = True
                wanted = delta_reads
        held: list[list[dict[Any, Any]]] = []
        for name in names:
            table = self._tables[name]
            groups: list[dict[Any, Any]] = []
            reads = table.reads
            for index, entries in enumerate(table.live):
                keys = wanted(name, index) if entries else []
                if keys is not None and not keys:  # nothing of it written
                    groups.append(_EMPTY)
                    continue
                groups.append(entries)
                shared = reads[index]
                if type(shared) is dict:
                    SharedGroup(table, index, snapshot, keys)
                else:
                    shared.share(snapshot, keys)
            held.append(groups)
        snapshot._held = held
        return snapshot

    def _swap_dirty(self) -> tuple[DirtyKeys, DirtyEntries]:
        """Changelog: the keys changed since the last snapshot and the map entries changed
        within the other keys, per state and key-group index, and fresh sets and dicts in
        their place (O(key groups x states))."""
        dirty: DirtyKeys = {}
        entries: DirtyEntries = {}
        for name, table in self._tables.items():
            if table.dirty is None or table.entries is None:
                continue
            swapped = _swap_nonempty(table.dirty, set)
            if swapped:
                dirty[name] = swapped
            swapped_entries = _swap_nonempty(table.entries, changed_entries)
            if swapped_entries:
                entries[name] = swapped_entries
        return dirty, entries

    def restore(self, snapshots: Iterable[bytes], base: _fs.Location | None = None) -> None:
        """Add the key groups of this backend's range from `snapshots` (others are skipped).

        A RocksDB checkpoint's native section is read as the canonical one, its files
        downloaded from `base` (the checkpoint's folder). Raises StateRestoreError for a
        damaged snapshot, another max parallelism, a key group found in two snapshots, or
        a state name restored as another kind.
        """
        restored: set[int] = set()
        chains: list[Any] = []  # changelog: the chain a lone manifest of this range names
        for data in snapshots:
            kind = section_kind(data)
            if kind == NATIVE_KIND:
                data = _native_as_canonical(data, base)
            elif kind == "heap-changelog":  # heap_changelog.CHANGELOG_KIND
                data, chain = _changelog_as_canonical(data, base, self.key_group_range)
                chains.append(chain)
            else:
                chains.append(None)
            header, body = state_format.decode(data, KEYED_STATE)
            states, key_groups = self._read_header(header)
            for key_group, (offset, length) in sorted(key_groups.items()):
                index = key_group - self._start
                if not 0 <= index < self._count:
                    continue
                if key_group in restored:
                    raise StateRestoreError(
                        f"key group {key_group} appears in two keyed-state snapshots"
                    )
                restored.add(key_group)
                names = [name for name, _ in states]
                per_state = decode_key_group(body, key_group, offset, length, names)
                for (name, kind), entries in zip(states, per_state, strict=True):
                    table = self._tables[name]
                    table.writable(index).update(entries)
                    if kind is StateKind.MAP:
                        note_map_values(table, entries.values())
        if self._changelog is not None:  # a chain is continued only if it is all the state
            self._changelog.restored(chains[0] if len(chains) == 1 else None)

    def _read_header(self, header: Any) -> tuple[list[tuple[str, StateKind]], dict[int, Any]]:
        """Check a keyed-state header and register its states; returns (states, key groups)."""
        states = self._restored_states(header)
        try:
            key_groups = {int(g): (int(o), int(n)) for g, (o, n) in header["key_groups"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise StateRestoreError(f"malformed keyed-state header: {error!r}") from error
        for name, kind in states:
            if name not in self._tables:
                self._tables[name] = StateTable(
                    self._count, self._changelog is not None, maps=kind is StateKind.MAP
                )
        return states, key_groups

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Changelog: later deltas build on this checkpoint's chain. Otherwise nothing to
        do: every snapshot is whole and frees its version on release."""
        if self._changelog is not None:
            self._changelog.complete(checkpoint_id)

    def dispose(self) -> None:
        """Drop every state (snapshots in flight keep their own versions)."""
        self._tables.clear()
        self._states.clear()


class HeapKeyedStateSnapshot:
    """The synchronous part of a heap snapshot: each state's key-group dicts as they were.

    `write` pickles them (uploader thread) one key group at a time, frame by frame;
    `release` drops them, so later writes stop copying the key groups only it held.
    """

    def __init__(
        self,
        key_group_range: KeyGroupRange,
        max_parallelism: int,
        states: list[tuple[str, StateKind]],
        filters: list[Callable[[Any], Any] | None],
    ) -> None:
        self._range = key_group_range
        self._max_parallelism = max_parallelism
        self._states = states
        self._filters = filters
        self._held: list[list[dict[Any, Any]]] | None = None
        """Per state, per key group of the range, the dict the snapshot holds."""
        self.released = False
        """Set once by `release` (any thread); the backend then stops protecting its dicts."""
        self._changelog: tuple[Chain | None, list[Pending]] | None = None
        """Changelog checkpoints: the chain to build on and the pending dirty keys."""
        self.delta_only = False
        """Holds only what its changelog delta reads: it cannot be written whole."""
        self._shared: list[tuple[str, int, bool]] = []
        self._garbage: list[Any] = []
        """What the barrier set aside instead of freeing (large sets): freed by `release`."""
        self._gc_hold: Callable[[], Any] = _nothing
        """Ends this snapshot's hold on the gc threshold (`_GcWhileHeld`); once."""

    def write(
        self,
        side_files: _fs.Location | None = None,
        shared: _fs.Location | None = None,
        final: bool = False,
    ) -> bytes:
        """The canonical "keyed-state" envelope (the heap backend has no side files); with
        changelog checkpoints and `shared` given, a delta or base uploaded there and the
        "heap-changelog" manifest naming the chain (`heap_changelog.py`).

        ConfigurationError names the state and key of a value that cannot be pickled.
        """
        held = self._held
        if held is None or self.released:
            raise RuntimeError("a released keyed-state snapshot cannot be written")
        if self._changelog is not None and side_files is not None and shared is not None:
            from barrierflow.state.heap_changelog import write_changelog

            section, self._shared = write_changelog(
                self, held, shared, *self._changelog, final=final
            )
            return section
        header, sections = self._canonical_header_and_sections(fast=side_files is not None)
        return state_format.encode_parts(KEYED_STATE, header, sections)

    def _canonical_header_and_sections(
        self, fast: bool = False
    ) -> tuple[dict[str, Any], list[bytes]]:
        """The "keyed-state" envelope's header and key-group sections of this snapshot:
        pickled (canonical), or with `fast` (checkpoints) marshalled where every object
        allows it (`heap_sections.py`); once a key group falls back to the pickle, the
        rest are pickled straight away."""
        held = self._held
        if held is None or self.released:
            raise RuntimeError("a released keyed-state snapshot cannot be written")
        self._check_whole()
        names = [name for name, _ in self._states]
        sections: list[bytes] = []
        index: dict[int, list[int]] = {}
        offset = 0
        start = self._range.start
        for i in range(len(self._range)):
            per_state = [
                filtered(groups[i], transform)
                for groups, transform in zip(held, self._filters, strict=True)
            ]
            if not any(per_state):
                continue
            section = encode_section(names, per_state, fast)
            fast = fast and section[0] == MARSHAL_TAG
            index[start + i] = [offset, len(section)]
            sections.append(section)
            offset += len(section)
        header = {
            "version": KEYED_STATE_VERSION,
            "max_parallelism": self._max_parallelism,
            "key_group_range": [self._range.start, self._range.end],
            "states": [[name, kind.value] for name, kind in self._states],
            "key_groups": index,
        }
        return header, sections

    def _check_whole(self) -> None:
        """RuntimeError if this snapshot holds only a delta's keys (`DirtyLog.delta_reads`
        decides at the barrier what its write decides again: they must agree)."""
        if self.delta_only:
            raise RuntimeError(
                "a heap snapshot taken for a changelog delta cannot be written whole"
            )

    def shared_files(self) -> list[tuple[str, int, bool]]:
        """After a changelog `write`: the chain's base and deltas (new: written by it);
        otherwise none (the section is whole in the state file)."""
        return list(self._shared)

    def release(self) -> None:
        """Drop the held dicts (idempotent, any thread)."""
        self._held = None
        self._garbage = []
        self.released = True
        self._gc_hold()  # once (a finalizer): also if the snapshot is dropped unreleased


def _swap_nonempty(per_group: list[Any], fresh: Callable[[], Any]) -> dict[int, Any]:
    """The non-empty items of `per_group` by index, each replaced by `fresh()` in place."""
    swapped: dict[int, Any] = {}
    for index, items in enumerate(per_group):
        if items:
            swapped[index] = items
            per_group[index] = fresh()
    return swapped


def _every_key(name: str, index: int) -> None:
    """What a whole snapshot reads of any key group: every key (None)."""
    return None


def _nothing() -> None:
    """A snapshot that holds nothing ends nothing."""


def filtered(entries: dict[Any, Any], transform: Callable[[Any], Any] | None) -> dict[Any, Any]:
    """`entries` as a snapshot filter writes them (a new dict; `entries` is not changed)."""
    if transform is None or not entries:
        return entries
    kept = {}
    for key, value in entries.items():
        written = transform(value)
        if written is not None:
            kept[key] = written
    return kept


def _native_as_canonical(data: bytes, base: _fs.Location | None) -> bytes:
    """A RocksDB checkpoint's keyed section as the canonical envelope (needs rocksdict)."""
    try:
        from barrierflow.state.rocksdb_backend import native_to_canonical
    except ModuleNotFoundError as error:
        raise StateRestoreError(
            "this checkpoint's keyed state was written by the RocksDB state backend; reading "
            f"it needs the rocksdict package: pip install 'barrierflow[rocksdb]' ({error})"
        ) from error
    return native_to_canonical(data, base)


def _changelog_as_canonical(
    data: bytes, base: _fs.Location | None, key_group_range: KeyGroupRange
) -> tuple[bytes, Any]:
    """A changelog manifest's chain applied (`heap_changelog.changelog_to_canonical`) for
    `key_group_range`, and the chain if the manifest covers exactly that range."""
    from barrierflow.state.heap_changelog import (
        changelog_to_canonical,
        manifest_chain,
        read_manifest,
    )

    header = read_manifest(data)
    canonical = changelog_to_canonical(data, base, key_group_range)
    same_range = list(header["key_group_range"]) == [key_group_range.start, key_group_range.end]
    return canonical, manifest_chain(header, base) if same_range and base is not None else None


def decode_key_group(
    body: bytes | memoryview, key_group: int, offset: int, length: int, state_names: list[str]
) -> list[dict[Any, Any]]:
    """The section of `key_group` in a keyed-state body: one dict of user key -> value per
    state of the header, in its order. Raises StateRestoreError for a damaged section."""
    if offset < 0 or length < 0 or offset + length > len(body):
        raise StateRestoreError(
            f"key group {key_group} lies at [{offset}, {offset + length}) outside "
            f"the {len(body)}-byte keyed-state body"
        )
    try:
        per_state = decode_section(body[offset : offset + length], len(state_names))
    except Exception as error:
        raise StateRestoreError(
            f"key group {key_group} of keyed state ({', '.join(state_names)}) cannot be "
            f"unpickled: {error!r}"
        ) from error
    if not isinstance(per_state, list) or len(per_state) != len(state_names):
        raise StateRestoreError(
            f"key group {key_group} holds {type(per_state).__name__} instead of "
            f"one dict for each of {len(state_names)} states"
        )
    return per_state
