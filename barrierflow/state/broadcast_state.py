"""Broadcast state (PyFlink's `BroadcastState`, `ReadOnlyBroadcastState`): named maps every
subtask of a broadcast operator holds a copy of, written only from the broadcast side.

Every subtask sees every broadcast element, so every copy is the same; each subtask
snapshots its own copy as operator state (msgpack-able, each map pickled whole):

    {"version": 1, "states": {<name>: <pickle of the dict>}}

At a restore, new subtask i takes the copy of old subtask i mod (old parallelism), as
Flink's round robin does: at the same parallelism each subtask takes back its own, when
scaling up the new subtasks read the old copies in turn, when scaling down the first
ones are kept. A copy's maps that the job no longer declares are kept and written back.

>>> from barrierflow.state import MapStateDescriptor
>>> rules = MapStateDescriptor("rules", None, None)
>>> old = [BroadcastStateStore([rules]) for _ in range(2)]
>>> for store in old:
...     store.broadcast_state(rules).put("max", 10)
>>> snapshots = [(i, store.snapshot()) for i, store in enumerate(old)]
>>> new = BroadcastStateStore.restored([rules], snapshots, subtask_index=2)
>>> new.read_only_state(rules).get("max"), dict(new.read_only_state(rules).items())
(10, {'max': 10})
"""

from __future__ import annotations

import pickle
from abc import abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from types import GenericAlias
from typing import Any

from barrierflow.core.state_descriptors import MapStateDescriptor
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state.values import State

__all__ = [
    "BroadcastState",
    "BroadcastStateStore",
    "ReadOnlyBroadcastState",
    "decode_broadcast_maps",
    "encode_broadcast_maps",
    "is_broadcast_snapshot",
]

BROADCAST_STATE_VERSION = 1
"""Schema of a subtask's broadcast state snapshot (see the module docstring)."""

_PICKLE_PROTOCOL = 5


class ReadOnlyBroadcastState(State):
    """A read-only view of a broadcast state (the non-broadcast side's): values are the
    stored objects themselves, so do not change them in place."""

    __class_getitem__ = classmethod(GenericAlias)  # generic in PyFlink: Foo[K, V]

    @abstractmethod
    def get(self, key: Any) -> Any:
        """The value of `key`, or None."""

    @abstractmethod
    def contains(self, key: Any) -> bool: ...

    @abstractmethod
    def items(self) -> Iterable[tuple[Any, Any]]: ...

    @abstractmethod
    def keys(self) -> Iterable[Any]: ...

    @abstractmethod
    def values(self) -> Iterable[Any]: ...

    @abstractmethod
    def is_empty(self) -> bool: ...

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class BroadcastState(ReadOnlyBroadcastState):
    """A map every subtask holds a copy of; write it only from `process_broadcast_element`,
    and write the same on every subtask (a restore hands each new subtask one old copy)."""

    @abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abstractmethod
    def put_all(self, dict_value: dict[Any, Any]) -> None: ...

    @abstractmethod
    def remove(self, key: Any) -> None: ...

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class _ReadOnlyView(ReadOnlyBroadcastState):
    """The non-broadcast side's view of one map: reads only."""

    def __init__(self, name: str, mapping: dict[Any, Any]) -> None:
        self._name = name
        self._map = mapping

    def get(self, key: Any) -> Any:
        return self._map.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._map

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._map.items())

    def keys(self) -> Iterable[Any]:
        return list(self._map)

    def values(self) -> Iterable[Any]:
        return list(self._map.values())

    def is_empty(self) -> bool:
        return not self._map

    def _read_only(self, *args: Any) -> None:
        raise ConfigurationError(
            f"broadcast state {self._name!r} is read-only in process_element (and on_timer): "
            "only process_broadcast_element may change it, so every subtask's copy stays equal"
        )

    put = put_all = remove = clear = __setitem__ = __delitem__ = _read_only


class _WritableState(_ReadOnlyView, BroadcastState):
    """The broadcast side's view of one map: reads and writes."""

    def put(self, key: Any, value: Any) -> None:
        self._map[key] = value

    def put_all(self, dict_value: dict[Any, Any]) -> None:
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        self._map.pop(key, None)

    def clear(self) -> None:
        self._map.clear()

    def __setitem__(self, key: Any, value: Any) -> None:
        self._map[key] = value

    def __delitem__(self, key: Any) -> None:
        self._map.pop(key, None)


class BroadcastStateStore:
    """One subtask's broadcast states, by descriptor name. Mailbox thread only."""

    def __init__(self, descriptors: Sequence[MapStateDescriptor]) -> None:
        self._names = {_name_of(descriptor) for descriptor in descriptors}
        self._maps: dict[str, dict[Any, Any]] = {name: {} for name in self._names}

    @classmethod
    def restored(
        cls,
        descriptors: Sequence[MapStateDescriptor],
        snapshots: Sequence[tuple[int, Any]],
        subtask_index: int,
    ) -> BroadcastStateStore:
        """The store of new subtask `subtask_index` from every old subtask's snapshot as
        (old subtask index, snapshot): old subtask `subtask_index mod len(snapshots)`'s copy."""
        store = cls(descriptors)
        if not snapshots:
            return store
        ordered = sorted(snapshots, key=lambda item: item[0])
        _, chosen = ordered[subtask_index % len(ordered)]
        store._maps.update(decode_broadcast_maps(chosen))
        return store

    def broadcast_state(self, descriptor: MapStateDescriptor) -> BroadcastState:
        """The writable state of `descriptor` (the broadcast side)."""
        name = self._declared(descriptor)
        return _WritableState(name, self._maps[name])

    def read_only_state(self, descriptor: MapStateDescriptor) -> ReadOnlyBroadcastState:
        """The read-only view of `descriptor` (the non-broadcast side, timers)."""
        name = self._declared(descriptor)
        return _ReadOnlyView(name, self._maps[name])

    def snapshot(self) -> dict[str, Any]:
        """Every map pickled now (a copy: later changes do not reach it)."""
        return encode_broadcast_maps(self._maps)

    def _declared(self, descriptor: Any) -> str:
        name = _name_of(descriptor)
        if name not in self._names:
            raise ConfigurationError(
                f"no broadcast state {name!r}: this operator's broadcast states are "
                f"{sorted(self._names)}, the descriptors given to broadcast(...)"
            )
        return name


def _name_of(descriptor: Any) -> str:
    if not isinstance(descriptor, MapStateDescriptor):
        raise ConfigurationError(
            f"broadcast state is described by a MapStateDescriptor, got {descriptor!r:.200}"
        )
    return descriptor.name


def is_broadcast_snapshot(state: Any) -> bool:
    """Whether an operator state value has the shape of a broadcast state snapshot."""
    return isinstance(state, dict) and {"version", "states"} <= state.keys()


def encode_broadcast_maps(maps: dict[str, dict[Any, Any]]) -> dict[str, Any]:
    """A subtask's snapshot of the broadcast maps `maps` by name (the module's format);
    also how the state processor writes broadcast state."""
    states = {}
    for name, mapping in maps.items():
        try:
            states[name] = pickle.dumps(mapping, protocol=_PICKLE_PROTOCOL)
        except Exception as error:
            raise ConfigurationError(
                f"broadcast state {name!r} holds something that cannot be pickled, so it "
                f"cannot be checkpointed: {error}"
            ) from error
    return {"version": BROADCAST_STATE_VERSION, "states": states}


def decode_broadcast_maps(snapshot: Any) -> dict[str, dict[Any, Any]]:
    """The maps by name of one subtask's snapshot; StateRestoreError naming what is wrong."""
    maps = {}
    for name, data in _checked(snapshot)["states"].items():
        try:
            mapping = pickle.loads(data)
        except Exception as error:
            raise StateRestoreError(
                f"broadcast state {name!r} cannot be unpickled: {error!r}"
            ) from error
        if not isinstance(mapping, dict):
            raise StateRestoreError(f"broadcast state {name!r} is no map: {mapping!r:.200}")
        maps[name] = mapping
    return maps


def _checked(state: Any) -> dict[str, Any]:
    if (
        not is_broadcast_snapshot(state)
        or state["version"] != BROADCAST_STATE_VERSION
        or not isinstance(state["states"], dict)
    ):
        version = state.get("version") if isinstance(state, dict) else None
        raise StateRestoreError(
            f"unknown broadcast state (version {version!r}; this barrierflow reads version "
            f"{BROADCAST_STATE_VERSION}): {state!r:.200}"
        )
    return state
