"""The heap keyed state backend: keyed state in dicts, one dict per state and key group.

Mailbox thread only. State lives as `tables[state name][key group - start][key]`,
so a value read or write is a list index and a dict operation, and a snapshot or
a restore handles whole key groups, which is what lets state be rescaled.

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
key groups in the restoring backend's range.

>>> from barrierflow.state import ValueStateDescriptor
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> count = backend.get_value_state(ValueStateDescriptor("count"))
>>> for word in ["a", "b", "a"]:
...     backend.set_current_key(word)
...     count.update((count.value() or 0) + 1)
>>> snapshot = backend.snapshot()
>>> restored = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> restored.restore([snapshot])
>>> restored.set_current_key("a")
>>> restored.get_value_state(ValueStateDescriptor("count")).value()
2
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

from barrierflow import _envelope as state_format
from barrierflow.core.state_descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)
from barrierflow.errors import ConfigurationError, StateRestoreError, StreamCorruptionError
from barrierflow.state.key_groups import KeyGroupRange, stable_hash
from barrierflow.state.values import ListState, MapState, ValueState

KEYED_STATE = "keyed-state"
"""Envelope kind of a keyed-state snapshot."""

KEYED_STATE_VERSION = 1
"""Schema of the keyed-state header and sections. Readers take 1 up to this."""

_Groups = list[dict[Any, Any]]
"""One state's entries: a dict of user key -> value per key group of the range."""

_NO_KEY = object()


class HeapKeyedStateBackend:
    """Keyed state of one subtask's key-group range, held in memory.

    Guarantees: a snapshot is a copy taken when `snapshot()` returns (later
    updates do not change it), and `restore` keeps exactly the key groups of
    this backend's range, so snapshots taken at one parallelism restore into
    another. Assumes records were routed by `stable_hash` over the same
    `max_parallelism`: a key outside the range is a StreamCorruptionError.
    Values are stored by reference: a value read from `ValueState` and mutated
    in place changes the state without `update()` (as in Flink's heap backend).
    """

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int) -> None:
        if max_parallelism < 1 or key_group_range.end >= max_parallelism:
            raise ConfigurationError(
                f"key-group range {key_group_range} does not fit max parallelism {max_parallelism}"
            )
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self._start = key_group_range.start
        self._count = len(key_group_range)
        self._current_key: Any = _NO_KEY
        self._current_index: Any = None
        """Current key group minus the range's start: the index into every state's groups."""
        self._kinds: dict[str, StateKind] = {}
        self._tables: dict[str, _Groups] = {}
        self._states: dict[str, _HeapState] = {}
        self._restored: set[str] = set()
        """Names of states whose kind came from a restored snapshot."""

    # ---- the current key (hot path) --------------------------------------------------------

    def set_current_key(self, key: Any) -> None:
        """Scope every state to `key` until the next call."""
        index = stable_hash(key) % self.max_parallelism - self._start
        if index < 0 or index >= self._count:
            self._routing_error(key, index + self._start)
        self._current_key = key
        self._current_index = index

    @property
    def current_key(self) -> Any:
        """The key set last, or None before the first `set_current_key`."""
        return None if self._current_key is _NO_KEY else self._current_key

    @property
    def current_key_group(self) -> int | None:
        """The key group of the current key, or None before the first `set_current_key`."""
        return None if self._current_index is None else self._current_index + self._start

    def _routing_error(self, key: Any, key_group: int) -> NoReturn:
        raise StreamCorruptionError(
            f"key {key!r:.200} is in key group {key_group}, outside this subtask's key groups "
            f"[{self.key_group_range.start}, {self.key_group_range.end}] (max parallelism "
            f"{self.max_parallelism}): the record was routed to the wrong subtask"
        )

    def _explain_key_error(self, error: TypeError) -> None:
        """A dict operation failed: raise a clear error if the key is missing or unhashable."""
        if self._current_key is _NO_KEY:
            raise ConfigurationError("keyed state was used before set_current_key()") from error
        try:
            hash(self._current_key)
        except TypeError:
            raise ConfigurationError(
                f"keyed state needs a hashable key; key {self._current_key!r:.200} is a "
                f"{type(self._current_key).__name__}. Return a tuple instead of a list "
                "from the key selector"
            ) from error

    # ---- registering states ----------------------------------------------------------------

    def get_value_state(self, descriptor: ValueStateDescriptor) -> ValueState:
        """The `ValueState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ValueStateDescriptor, _HeapValueState)  # type: ignore[return-value]

    def get_list_state(self, descriptor: ListStateDescriptor) -> ListState:
        """The `ListState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, ListStateDescriptor, _HeapListState)  # type: ignore[return-value]

    def get_map_state(self, descriptor: MapStateDescriptor) -> MapState:
        """The `MapState` named by `descriptor` (the same object on every call)."""
        return self._state(descriptor, MapStateDescriptor, _HeapMapState)  # type: ignore[return-value]

    def _state(
        self,
        descriptor: StateDescriptor,
        expected: type[StateDescriptor],
        implementation: type[_HeapState],
    ) -> _HeapState:
        if not isinstance(descriptor, expected):
            raise ConfigurationError(f"expected a {expected.__name__}, got {descriptor!r:.200}")
        name = descriptor.name
        kind = self._kinds.setdefault(name, descriptor.kind)
        if kind is not descriptor.kind and name in self._restored:
            raise StateRestoreError(
                f"the checkpoint holds state {name!r} as {kind.value} state, this job declares "
                f"it as {descriptor.kind.value} state"
            )
        if kind is not descriptor.kind:
            raise ConfigurationError(
                f"state {name!r} is {kind.value} state; it cannot also be {descriptor.kind.value} "
                "state. Give each state its own name"
            )
        state = self._states.get(name)
        if state is not None:
            return state
        groups = self._tables.get(name)
        if groups is None:
            groups = self._tables[name] = [{} for _ in range(self._count)]
        state = self._states[name] = implementation(self, groups)
        return state

    def keys(self, state_name: str) -> Iterator[Any]:
        """Every key with a value in state `state_name` (none if it is unknown).

        Safe to use while changing the state: each key group's keys are copied
        before they are yielded.
        """
        for entries in self._tables.get(state_name, ()):
            yield from list(entries)

    # ---- snapshot and restore --------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Every state of every key group, serialized now (see the module docstring)."""
        names = list(self._tables)
        tables = [self._tables[name] for name in names]
        sections: list[bytes] = []
        index: dict[int, list[int]] = {}
        offset = 0
        for i in range(self._count):
            per_state = [groups[i] for groups in tables]
            if not any(per_state):
                continue
            try:
                section = pickle.dumps(per_state, protocol=5)
            except Exception as error:
                raise self._pickle_error(names, per_state, error) from error
            index[self._start + i] = [offset, len(section)]
            sections.append(section)
            offset += len(section)
        header = {
            "version": KEYED_STATE_VERSION,
            "max_parallelism": self.max_parallelism,
            "key_group_range": [self.key_group_range.start, self.key_group_range.end],
            "states": [[name, self._kinds[name].value] for name in names],
            "key_groups": index,
        }
        return state_format.encode(KEYED_STATE, header, b"".join(sections))

    @staticmethod
    def _pickle_error(
        names: list[str], per_state: list[dict[Any, Any]], error: Exception
    ) -> ConfigurationError:
        for name, entries in zip(names, per_state, strict=True):
            for key, value in entries.items():
                for what, thing in (("key", key), ("value", value)):
                    try:
                        pickle.dumps(thing, protocol=5)
                    except Exception:
                        return ConfigurationError(
                            f"the {what} of state {name!r} for key {key!r:.200} cannot be "
                            f"pickled, so it cannot be checkpointed: {error}"
                        )
        return ConfigurationError(f"keyed state cannot be pickled: {error}")

    def restore(self, snapshots: Iterable[bytes]) -> None:
        """Add the key groups of this backend's range from `snapshots` (others are skipped).

        Raises StateRestoreError for a damaged snapshot, another max parallelism,
        a key group found in two snapshots, or a state name restored as another kind.
        """
        restored: set[int] = set()
        for data in snapshots:
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
                for (name, _), entries in zip(states, per_state, strict=True):
                    self._tables[name][index].update(entries)

    def _read_header(self, header: Any) -> tuple[list[tuple[str, StateKind]], dict[int, Any]]:
        """Check a keyed-state header and register its states; returns (states, key groups)."""
        check_keyed_header_version(header)
        if header.get("max_parallelism") != self.max_parallelism:
            raise StateRestoreError(
                f"keyed state was taken with max parallelism {header.get('max_parallelism')}, "
                f"this operator has {self.max_parallelism}; key groups cannot be redistributed"
            )
        states: list[tuple[str, StateKind]] = []
        try:
            for name, kind_name in header["states"]:
                states.append((name, StateKind(kind_name)))
            key_groups = {int(g): (int(o), int(n)) for g, (o, n) in header["key_groups"].items()}
        except (KeyError, TypeError, ValueError) as error:
            raise StateRestoreError(f"malformed keyed-state header: {error!r}") from error
        for name, kind in states:
            known = self._kinds.setdefault(name, kind)
            self._restored.add(name)
            if known is not kind:
                raise StateRestoreError(
                    f"the checkpoint holds state {name!r} as {kind.value} state, this job "
                    f"declares it as {known.value} state"
                )
            if name not in self._tables:
                self._tables[name] = [{} for _ in range(self._count)]
        return states, key_groups


def check_keyed_header_version(header: Any) -> None:
    """Refuse a keyed-state header that is no map, or of a version this release cannot read."""
    if not isinstance(header, dict):
        raise StateRestoreError(f"a keyed-state header must be a dict, found {header!r:.200}")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= KEYED_STATE_VERSION:
        raise StateRestoreError(
            f"keyed state has version {version!r}; this barrierflow reads versions 1 to "
            f"{KEYED_STATE_VERSION}"
        )


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
        per_state = pickle.loads(body[offset : offset + length])
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


class _HeapState:
    """Base of the heap state handles: the backend (for the current key) and the state's groups."""

    __slots__ = ("_backend", "_groups")

    def __init__(self, backend: HeapKeyedStateBackend, groups: _Groups) -> None:
        self._backend = backend
        self._groups = groups

    def _entries(self) -> dict[Any, Any]:
        index = self._backend._current_index
        if index is None:
            raise ConfigurationError("keyed state was used before set_current_key()")
        return self._groups[index]

    def clear(self) -> None:
        backend = self._backend
        try:
            self._groups[backend._current_index].pop(backend._current_key, None)
        except TypeError as error:
            backend._explain_key_error(error)
            raise


class _HeapValueState(_HeapState, ValueState):
    __slots__ = ()

    def value(self) -> Any:
        backend = self._backend
        try:
            return self._groups[backend._current_index].get(backend._current_key)
        except TypeError as error:
            backend._explain_key_error(error)
            raise

    def update(self, value: Any) -> None:
        backend = self._backend
        try:
            if value is None:
                self._groups[backend._current_index].pop(backend._current_key, None)
            else:
                self._groups[backend._current_index][backend._current_key] = value
        except TypeError as error:
            backend._explain_key_error(error)
            raise


class _HeapListState(_HeapState, ListState):
    __slots__ = ()

    def _current(self) -> list[Any] | None:
        try:
            return self._entries().get(self._backend._current_key)
        except TypeError as error:
            self._backend._explain_key_error(error)
            raise

    def get(self) -> list[Any]:
        values = self._current()
        return [] if values is None else list(values)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ListState")
        values = self._current()
        if values is None:
            self._entries()[self._backend._current_key] = [value]
        else:
            values.append(value)

    def add_all(self, values: Iterable[Any] | None) -> None:
        new = _without_none(values)
        if not new:
            return
        current = self._current()
        if current is None:
            self._entries()[self._backend._current_key] = new
        else:
            current.extend(new)

    def update(self, values: Iterable[Any] | None) -> None:
        new = _without_none(values)
        if new:
            self._current()  # checks the key
            self._entries()[self._backend._current_key] = new
        else:
            self.clear()


def _without_none(values: Iterable[Any] | None) -> list[Any]:
    new = [] if values is None else list(values)
    if any(value is None for value in new):
        raise ValueError("cannot add None to a ListState")
    return new


class _HeapMapState(_HeapState, MapState):
    __slots__ = ()

    def _current(self) -> dict[Any, Any] | None:
        try:
            return self._entries().get(self._backend._current_key)
        except TypeError as error:
            self._backend._explain_key_error(error)
            raise

    def _for_writing(self) -> dict[Any, Any]:
        current = self._current()
        if current is None:
            current = self._entries()[self._backend._current_key] = {}
        return current

    def get(self, key: Any) -> Any:
        current = self._current()
        return None if current is None else current.get(key)

    def put(self, key: Any, value: Any) -> None:
        self._for_writing()[key] = value

    def put_all(self, mapping: dict[Any, Any]) -> None:
        if mapping:
            self._for_writing().update(mapping)

    def remove(self, key: Any) -> None:
        current = self._current()
        if current is not None:
            current.pop(key, None)
            if not current:
                self.clear()

    def contains(self, key: Any) -> bool:
        current = self._current()
        return current is not None and key in current

    def keys(self) -> list[Any]:
        current = self._current()
        return [] if current is None else list(current)

    def values(self) -> list[Any]:
        current = self._current()
        return [] if current is None else list(current.values())

    def items(self) -> list[tuple[Any, Any]]:
        current = self._current()
        return [] if current is None else list(current.items())

    def is_empty(self) -> bool:
        return not self._current()
