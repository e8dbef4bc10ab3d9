"""The heap backend's storage: per state, its key groups' dicts with copy-on-write while a
snapshot holds them, and the value, list and map handles that read and write through them.

A snapshot (`heap_backend.py`) shares each key group's dict instead of copying it; the first
write to a shared key group after the barrier copies that one dict (`SharedGroup`), and
with changelog checkpoints the handles also add each key they write, clear or hand out
mutable to the key group's dirty set (`StateTable.dirty`), one C-level `set.add` in the
handle's own frame; a map state's handle records the user keys it changes within a map
(`StateTable.entries`), so a delta holds those entries instead of the whole map. Values
of immutable types are handed out as they are; anything else is copied on the way out
of a shared group, so a snapshot in flight never sees a later write — unless every
snapshot holding the group is a delta that does not write that key. Mailbox thread only.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

from barrierflow.errors import ConfigurationError
from barrierflow.state.batched import key_group_indices
from barrierflow.state.heap_copies import IMMUTABLE_TYPES, copy_value, is_immutable
from barrierflow.state.key_scope import unhashable_key
from barrierflow.state.values import ListState, MapState, ValueState, list_values

if TYPE_CHECKING:
    from barrierflow.state.heap_backend import HeapKeyedStateBackend, HeapKeyedStateSnapshot


def changed_entries() -> defaultdict[Any, set[Any]]:
    """A key group's map entries changed: key -> user keys (a set made on first use)."""
    return defaultdict(set)


class StateTable:
    """One state's key groups: the live dicts, and per key group what reads and writes go
    through: the live dict itself, or its `SharedGroup` while a snapshot holds it."""

    __slots__ = ("dirty", "entries", "flat_maps", "live", "reads", "writes")

    def __init__(self, count: int, tracked: bool = False, maps: bool = False) -> None:
        self.flat_maps = maps
        """A map state whose every map value so far is of an `IMMUTABLE_TYPES` type: a copy
        of one of its maps is `dict.copy()` (its keys are hashable, never changed in
        place), not the slower `copy_value`. Cleared by the first other value put."""
        self.live: list[dict[Any, Any]] = [{} for _ in range(count)]
        self.reads: list[Any] = list(self.live)
        self.writes: list[Any] = list(self.live)
        self.dirty: list[set[Any]] | None = [set() for _ in range(count)] if tracked else None
        """Changelog checkpoints: per key group, the keys written, cleared or handed out
        mutable since the last snapshot (which swaps each set for a fresh one in place, so
        the handles' reference to this list stays valid); None: not tracked."""
        self.entries: list[defaultdict[Any, set[Any]]] | None = (
            [changed_entries() for _ in range(count)] if tracked else None
        )
        """Changelog checkpoints of a map state: per key group, key -> the user keys put,
        removed or handed out mutable since the last snapshot, for keys whose map was
        otherwise left alone (a key in `dirty` too is written whole); swapped as `dirty`."""

    def writable(self, index: int) -> dict[Any, Any]:
        """Key group `index`'s live dict, copied first if a snapshot holds it."""
        target = self.writes[index]
        return target if type(target) is dict else target.writable()


class SharedGroup:
    """Key group `index` of one state while snapshots hold its dict or values in it.

    Stands in the table's `reads` and `writes` in place of the live dict, so the hot
    path (a list index and a dict operation) is unchanged and only the first accesses
    after a snapshot pay: the first write copies the dict (then `writes` holds the copy),
    the first read of a mutable value copies the value. A changelog delta's snapshot holds
    only the keys its delta writes (`wanted`): the values of the others are handed out as
    they are. Mailbox thread only; the holders' `released` flags are set by the uploader
    thread, and a flag read as not yet set only costs a copy that was not needed.
    """

    __slots__ = ("_dict_shared", "_holders", "_index", "_live", "_owned", "_table", "_wanted")

    def __init__(
        self,
        table: StateTable,
        index: int,
        holder: HeapKeyedStateSnapshot,
        wanted: list[Container[Any]] | None = None,
    ) -> None:
        self._table = table
        self._index = index
        self._live = table.live[index]
        """`table.live[index]` (kept equal by `writable`): one lookup less per access."""
        self._holders: list[tuple[HeapKeyedStateSnapshot, list[Container[Any]] | None]] = [
            (holder, wanted)
        ]
        """Each snapshot holding the group, with the keys whose values it reads (None: all)."""
        self._wanted = wanted
        """Keys some holder reads: in one of these containers (None: every key)."""
        self._dict_shared = True
        """The live dict is one a snapshot holds: copy it before a write."""
        self._owned: set[Any] = set()
        """Keys whose value no snapshot holds (copied or written since the snapshot)."""
        table.reads[index] = table.writes[index] = self

    def share(
        self, holder: HeapKeyedStateSnapshot, wanted: list[Container[Any]] | None = None
    ) -> None:
        """Another snapshot holds the live dict (and the values of the keys `wanted`, None:
        every key) too."""
        self._holders = [held for held in self._holders if not held[0].released]
        self._holders.append((holder, wanted))
        self._wanted = _union_wanted([keys for _, keys in self._holders])
        self._dict_shared = True
        if self._owned:  # freed with the snapshot (uploader thread), not in the barrier's pause
            holder._garbage.append(self._owned)
            self._owned = set()
        table = self._table
        table.reads[self._index] = table.writes[self._index] = self

    def _unshare_if_released(self) -> bool:
        """Every holder is released: put the live dict back in place of this (no copy)."""
        for holder, _ in self._holders:
            if not holder.released:
                return False
        table, index = self._table, self._index
        table.reads[index] = table.writes[index] = self._live
        return True

    def writable(self) -> dict[Any, Any]:
        """The live dict, made a copy of its own first if a snapshot holds it."""
        if self._dict_shared and not self._unshare_if_released():
            table, index = self._table, self._index
            self._live = table.live[index] = table.writes[index] = dict(self._live)
            self._dict_shared = False
        return self._live

    # the read path: ValueState.value, the reads (and in-place writes) of list and map state
    def get(self, key: Any) -> Any:
        value = self._live.get(key)
        if value is None or type(value) in IMMUTABLE_TYPES or key in self._owned:
            return value
        return self._held(key, value)

    def _held(self, key: Any, value: Any) -> Any:
        """`value` of `key`, which a snapshot may hold: as it is if it cannot change in
        place (a tuple of such values) or no snapshot holds it (any more), else a copy of
        its own that replaces it in the live dict."""
        if self._unshare_if_released():  # first: reads go back to the plain dict at once
            return value
        wanted = self._wanted
        if wanted is not None:
            for keys in wanted:  # a loop: no generator per read
                if key in keys:
                    break
            else:
                self._owned.add(key)  # no holder reads it
                return value
        if is_immutable(value):  # not remembered: `share` would clear that set at the barrier
            return value
        copied = value.copy() if self._table.flat_maps else copy_value(value)
        if copied is not value:
            self.writable()[key] = copied
            self._owned.add(key)
        return copied

    # the write path: ValueState.update, clear, a list or map state's new entry
    def __setitem__(self, key: Any, value: Any) -> None:
        self.writable()[key] = value
        self._owned.add(key)

    def pop(self, key: Any, default: Any = None) -> Any:
        return self.writable().pop(key, default)


def _union_wanted(wanted_by: list[list[Container[Any]] | None]) -> list[Container[Any]] | None:
    """The keys some holder reads, given each holder's (None: every key)."""
    union: list[Container[Any]] = []
    for keys in wanted_by:
        if keys is None:
            return None
        union.extend(keys)
    return union


# ---- the state handles ----------------------------------------------------------------------


class HeapState:
    """Base of the heap state handles: the backend (for the current key) and the state's
    per-key-group read and write paths (`StateTable.reads`, `StateTable.writes`) and, with
    changelog checkpoints, its dirty sets (`StateTable.dirty`), which the tracked handles
    (`TRACKED`) fill in the same frame as the dict operation (no further Python call on
    the record path); the plain handles never look at them."""

    __slots__ = ("_backend", "_dirty", "_reads", "_table", "_writes")

    def __init__(self, backend: HeapKeyedStateBackend, table: StateTable) -> None:
        self._backend = backend
        self._table = table
        self._reads = table.reads
        self._writes = table.writes
        self._dirty = table.dirty

    def _current(self) -> Any:
        """The current key's entry (a copy of its own if a snapshot holds it), or None."""
        backend = self._backend
        try:
            return self._reads[backend._current_index].get(backend._current_key)
        except TypeError as error:
            backend._explain_key_error(error)
            raise

    _peek = _current
    """The same read, named where the caller only reads (a tracked handle marks nothing
    dirty) and hands out nothing that could be changed in place."""

    def _put(self, value: Any) -> None:
        backend = self._backend
        self._writes[backend._current_index][backend._current_key] = value

    def clear(self) -> None:
        backend = self._backend
        try:
            self._writes[backend._current_index].pop(backend._current_key, None)
        except TypeError as error:
            backend._explain_key_error(error)
            raise


class HeapValueState(HeapState, ValueState):
    __slots__ = ()

    value = HeapState._current  # the hot path: no call in between

    def update(self, value: Any) -> None:
        backend = self._backend
        try:
            if value is None:
                self._writes[backend._current_index].pop(backend._current_key, None)
            else:
                self._writes[backend._current_index][backend._current_key] = value
        except TypeError as error:
            backend._explain_key_error(error)
            raise

    # batched access (`state/batched.py`): one pass of dict operations through the same
    # per-key-group read and write paths as value() and update(), so copy-on-write holds
    def get_many(self, keys: Any, key_groups: Any = None) -> list[Any]:
        backend = self._backend
        indices = key_group_indices(
            keys, key_groups, backend.key_group_range, backend.max_parallelism
        )
        reads = self._reads
        try:
            values = [reads[index].get(key) for index, key in zip(indices, keys, strict=True)]
        except TypeError as error:
            raise _unhashable(keys, error) from error
        dirty = self._dirty
        if dirty is not None:
            for index, key, value in zip(indices, keys, values, strict=True):
                if value is not None and type(value) not in IMMUTABLE_TYPES:
                    dirty[index].add(key)
        return values

    def put_many(self, keys: Any, values: Any, key_groups: Any = None) -> None:
        backend = self._backend
        indices = key_group_indices(
            keys, key_groups, backend.key_group_range, backend.max_parallelism
        )
        writes = self._writes
        try:
            for index, key, value in zip(indices, keys, values, strict=True):
                if value is None:
                    writes[index].pop(key, None)
                else:
                    writes[index][key] = value
        except TypeError as error:
            raise _unhashable(keys, error) from error
        _mark(self._dirty, indices, keys)

    def remove_many(self, keys: Any, key_groups: Any = None) -> None:
        backend = self._backend
        indices = key_group_indices(
            keys, key_groups, backend.key_group_range, backend.max_parallelism
        )
        writes = self._writes
        try:
            for index, key in zip(indices, keys, strict=True):
                writes[index].pop(key, None)
        except TypeError as error:
            raise _unhashable(keys, error) from error
        _mark(self._dirty, indices, keys)


def _mark(dirty: list[set[Any]] | None, indices: Any, keys: Any) -> None:
    """Tracked: mark every key of a batch dirty in its key group's set."""
    if dirty is not None:
        for index, key in zip(indices, keys, strict=True):
            dirty[index].add(key)


def note_map_values(table: StateTable, maps: Iterable[dict[Any, Any]]) -> None:
    """`maps` are stored in `table`: it keeps `flat_maps` only if their values allow it."""
    if table.flat_maps:
        for mapping in maps:
            _note_values(table, mapping)


def _note_values(table: StateTable, mapping: dict[Any, Any]) -> None:
    if table.flat_maps and not set(map(type, mapping.values())) <= IMMUTABLE_TYPES:
        table.flat_maps = False


def _unhashable(keys: Any, error: TypeError) -> ConfigurationError:
    """A batched access failed on an unhashable key: name it (as `_explain_key_error`)."""
    for key in keys:
        try:
            hash(key)
        except TypeError:
            return unhashable_key(key)
    return ConfigurationError(f"batched keyed state access failed: {error}")


class HeapListState(HeapState, ListState):
    __slots__ = ()

    def get(self) -> list[Any]:
        values = self._peek()  # a copy is handed out: not dirty
        return [] if values is None else list(values)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ListState")
        values = self._current()
        if values is None:
            self._put([value])
        else:
            values.append(value)

    def add_all(self, values: Iterable[Any] | None) -> None:
        new = list_values(values)
        if not new:
            return
        current = self._current()
        if current is None:
            self._put(new)
        else:
            current.extend(new)

    def update(self, values: Iterable[Any] | None) -> None:
        new = list_values(values)
        if new:
            self._current()  # checks the key
            self._put(new)
        else:
            self.clear()


class HeapMapState(HeapState, MapState):
    __slots__ = ()

    def _for_writing(self) -> dict[Any, Any]:
        current = self._current()
        if current is None:
            current = {}
            self._put(current)
        return current

    def get(self, key: Any) -> Any:
        current = self._current()
        return None if current is None else current.get(key)

    def put(self, key: Any, value: Any) -> None:
        if type(value) not in IMMUTABLE_TYPES:
            self._table.flat_maps = False
        self._for_writing()[key] = value

    def put_all(self, mapping: dict[Any, Any]) -> None:
        if mapping:
            _note_values(self._table, mapping)
            self._for_writing().update(mapping)

    def remove(self, key: Any) -> None:
        current = self._current()
        if current is not None:
            current.pop(key, None)
            if not current:
                self.clear()

    def contains(self, key: Any) -> bool:
        current = self._peek()
        return current is not None and key in current

    def keys(self) -> list[Any]:
        current = self._peek()  # map keys are hashable, hence not changed in place
        return [] if current is None else list(current)

    def values(self) -> list[Any]:
        current = self._current()
        return [] if current is None else list(current.values())

    def items(self) -> list[tuple[Any, Any]]:
        current = self._current()
        return [] if current is None else list(current.items())

    def is_empty(self) -> bool:
        return not self._peek()


# ---- changelog checkpoints: the same handles, recording what they change ---------------------


def _tracked_current(self: HeapState) -> Any:
    """`_current`, marking dirty a value that could be changed in place (it may be)."""
    backend = self._backend
    index = backend._current_index
    key = backend._current_key
    try:
        value = self._reads[index].get(key)
    except TypeError as error:
        backend._explain_key_error(error)
        raise
    if value is not None and type(value) not in IMMUTABLE_TYPES:
        self._dirty[index].add(key)  # type: ignore[index]
    return value


def _tracked_put(self: HeapState, value: Any) -> None:
    backend = self._backend
    index = backend._current_index
    key = backend._current_key
    self._writes[index][key] = value
    self._dirty[index].add(key)  # type: ignore[index]


def _tracked_clear(self: HeapState) -> None:
    backend = self._backend
    index = backend._current_index
    key = backend._current_key
    try:
        self._writes[index].pop(key, None)
    except TypeError as error:
        backend._explain_key_error(error)
        raise
    self._dirty[index].add(key)  # type: ignore[index]


def _tracked_update(self: HeapState, value: Any) -> None:
    backend = self._backend
    index = backend._current_index
    key = backend._current_key
    try:
        if value is None:
            self._writes[index].pop(key, None)
        else:
            self._writes[index][key] = value
    except TypeError as error:
        backend._explain_key_error(error)
        raise
    self._dirty[index].add(key)  # type: ignore[index]


class TrackedValueState(HeapValueState):
    __slots__ = ()
    _current = _tracked_current
    value = _tracked_current
    _put = _tracked_put
    clear = _tracked_clear
    update = _tracked_update


class TrackedListState(HeapListState):
    __slots__ = ()
    _current = _tracked_current
    _put = _tracked_put
    clear = _tracked_clear


class TrackedMapState(HeapMapState):
    """Entry by entry: `put`, `put_all`, `remove` and a `get` handing out a mutable value
    record the user keys in `StateTable.entries`, so a delta holds only the entries that
    changed; a map created or cleared, and `values()` / `items()` (which hand out every
    value), mark the whole key dirty."""

    __slots__ = ("_entries",)
    _current = _tracked_current
    _put = _tracked_put
    clear = _tracked_clear

    def __init__(self, backend: HeapKeyedStateBackend, table: StateTable) -> None:
        super().__init__(backend, table)
        self._entries: list[defaultdict[Any, set[Any]]] = table.entries  # type: ignore[assignment]

    # marking an entry is one line in the handle's own frame (no call): a defaultdict
    def get(self, key: Any) -> Any:
        current = self._peek()
        if current is None:
            return None
        value = current.get(key)
        if value is not None and type(value) not in IMMUTABLE_TYPES:  # may change in place
            backend = self._backend
            self._entries[backend._current_index][backend._current_key].add(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        if type(value) not in IMMUTABLE_TYPES:
            self._table.flat_maps = False
        current = self._peek()
        if current is None:
            self._put({key: value})
            return
        current[key] = value
        backend = self._backend
        self._entries[backend._current_index][backend._current_key].add(key)

    def put_all(self, mapping: dict[Any, Any]) -> None:
        if not mapping:
            return
        _note_values(self._table, mapping)
        current = self._peek()
        if current is None:
            self._put(dict(mapping))
        else:
            current.update(mapping)
            backend = self._backend
            self._entries[backend._current_index][backend._current_key].update(mapping)

    def remove(self, key: Any) -> None:
        current = self._peek()
        if current is None or current.pop(key, _MISSING) is _MISSING:
            return
        if current:
            backend = self._backend
            self._entries[backend._current_index][backend._current_key].add(key)
        else:
            self.clear()


_MISSING = object()


TRACKED: dict[type[HeapState], type[HeapState]] = {
    HeapValueState: TrackedValueState,
    HeapListState: TrackedListState,
    HeapMapState: TrackedMapState,
}
"""The handle a backend with changelog checkpoints uses in place of each plain one."""
