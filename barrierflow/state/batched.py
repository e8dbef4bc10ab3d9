"""Batched state access: the key-group indices of many keys at once, and the handles a
`KeyedBatchFunction` gets (`BatchValueState`, `BatchListState`, `BatchMapState`).

A keyed step that takes a batch reads and writes the state of all its keys in a few calls
instead of one Python call per record through `set_current_key` and `value()`: for value
state the heap backend does a dict operation per key in one pass, RocksDB one multi-get
and one WriteBatch. Both backends' value-state handles, and the TTL value handle over
them (`state/ttl.py`), have the three methods with the same contract (below);
`BatchValueState` is what user code holds. List and map state have no multi-key access
in the backends: their batched handles go key by key through the per-key handles (with
TTL if the state has one), so they give exactly the per-key results.

>>> from barrierflow.state import ValueStateDescriptor
>>> from barrierflow.state.heap_backend import HeapKeyedStateBackend
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> counts = BatchValueState(backend.get_value_state(ValueStateDescriptor("count")))
>>> counts.put_many(["a", "b"], [1, 2])
>>> counts.get_many(["b", "c", "a"])
[2, None, 1]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import numpy as np
import pyarrow as pa

from barrierflow.errors import ConfigurationError, StreamCorruptionError
from barrierflow.state.key_group_arrays import key_groups_of_array
from barrierflow.state.key_groups import KeyGroupRange, stable_hash

if TYPE_CHECKING:
    from barrierflow.state.backend import KeyedStateBackend

__all__ = [
    "BatchListState",
    "BatchMapState",
    "BatchValueState",
    "MultiKeyValueState",
    "key_group_indices",
]


class MultiKeyValueState(Protocol):
    """What both backends' value-state handles offer beside `value()` / `update()`.

    `keys` is a sequence of Python keys; `key_groups` (optional, one int per key, a list or
    numpy array) are their key groups when the caller has them already (a batch's keys
    hashed once, `key_group_arrays`); they must be what `assign_to_key_group` gives.
    Duplicate keys are allowed: `put_many` and `remove_many` apply in order (the last
    write of a key wins). A key outside the backend's key groups is a
    StreamCorruptionError, as for `set_current_key`; the current key is not changed.
    """

    def get_many(self, keys: Sequence[Any], key_groups: Any = None) -> list[Any]:
        """Each key's value (None where it has none), in the order of `keys`."""
        ...

    def put_many(self, keys: Sequence[Any], values: Sequence[Any], key_groups: Any = None) -> None:
        """Set each key's value (None removes it, as `update(None)`)."""
        ...

    def remove_many(self, keys: Sequence[Any], key_groups: Any = None) -> None:
        """Remove each key's value (as `clear()` per key)."""
        ...


def key_group_indices(
    keys: Sequence[Any], key_groups: Any, key_group_range: KeyGroupRange, max_parallelism: int
) -> list[int]:
    """Each key's key group minus the range's start (an index into a backend's key groups);
    StreamCorruptionError for a key outside the range."""
    start, end = key_group_range.start, key_group_range.end
    if key_groups is None:
        try:
            groups = np.fromiter(
                (stable_hash(key) % max_parallelism for key in keys), np.int64, len(keys)
            )
        except TypeError as error:
            raise ConfigurationError(f"keyed state needs hashable keys: {error}") from error
    else:
        groups = np.asarray(key_groups, dtype=np.int64)
        if len(groups) != len(keys):
            raise ValueError(f"{len(groups)} key groups for {len(keys)} keys")
    if len(groups) and (groups.min() < start or groups.max() > end):
        outside = int(np.flatnonzero((groups < start) | (groups > end))[0])
        _routing_error(keys[outside], int(groups[outside]), key_group_range, max_parallelism)
    return (groups - start).tolist()


def _routing_error(key: Any, key_group: int, kg_range: KeyGroupRange, max_p: int) -> NoReturn:
    raise StreamCorruptionError(
        f"key {key!r:.200} is in key group {key_group}, outside this subtask's key groups "
        f"[{kg_range.start}, {kg_range.end}] (max parallelism {max_p}): the record was "
        "routed to the wrong subtask"
    )


def _groups_of_batch_keys(keys: Sequence[Any], batch_keys: list[Any], groups: Any) -> Any:
    """The key groups of `keys` looked up among the batch's (None if one is not there or
    a key is unhashable: then they are hashed)."""
    try:
        group_of = dict(zip(batch_keys, groups.tolist(), strict=True))
        return [group_of[key] for key in keys]
    except (KeyError, TypeError):
        return None


def _resolved(keys: Any, batch_keys: Any, max_parallelism: int) -> tuple[Sequence[Any], Any]:
    """(keys as a Python sequence, their key groups or None): an Arrow array hashed
    vectorized; the batch's own key list (or some of its keys) with the operator's groups."""
    if isinstance(keys, pa.Array | pa.ChunkedArray):
        return keys.to_pylist(), key_groups_of_array(keys, max_parallelism)
    if batch_keys is not None:
        current_keys, groups = batch_keys()
        if keys is current_keys:
            return keys, groups
        if groups is not None:  # some of the batch's keys (its distinct keys, say)
            return keys, _groups_of_batch_keys(keys, current_keys, groups)
    return keys, None


def _checked_length(what: str, items: Any, keys: Sequence[Any]) -> list[Any]:
    """`items` as a list with one item per key (ValueError otherwise)."""
    if isinstance(items, pa.Array | pa.ChunkedArray):
        items = items.to_pylist()
    if isinstance(items, str | bytes):
        raise TypeError(f"{what} must be a sequence with one item per key, got {items!r:.100}")
    if len(items) != len(keys):
        raise ValueError(f"got {len(items)} {what} for {len(keys)} keys")
    return list(items)


class BatchValueState:
    """A value state read and written for many keys at once (`KeyedBatchFunction`).

    `keys` may be a list of Python keys or a pyarrow Array (hashed vectorized, then
    converted once). Passing the batch's own key list (`ctx.keys`) reuses the key groups
    the operator computed for the batch. `inner` is a backend's value-state handle or a
    TTL handle over one (`state/ttl.py`); both have the `MultiKeyValueState` methods.
    """

    __slots__ = ("_batch_keys", "_inner", "_max_parallelism")

    def __init__(self, inner: Any, batch_keys: Any = None, max_parallelism: int | None = None):
        self._inner = inner
        self._batch_keys = batch_keys
        """Callable -> (keys list, key groups) of the batch being processed, or None."""
        if max_parallelism is None:
            max_parallelism = inner._backend.max_parallelism
        self._max_parallelism = max_parallelism

    def get_many(self, keys: Any) -> list[Any]:
        """Each key's value (None where it has none), in the order of `keys`."""
        keys, groups = _resolved(keys, self._batch_keys, self._max_parallelism)
        return self._inner.get_many(keys, groups)

    def put_many(self, keys: Any, values: Sequence[Any]) -> None:
        """Set each key's value, in order (None removes it)."""
        keys, groups = _resolved(keys, self._batch_keys, self._max_parallelism)
        if len(values) != len(keys):
            raise ValueError(f"put_many got {len(values)} values for {len(keys)} keys")
        self._inner.put_many(keys, values, groups)

    def remove_many(self, keys: Any) -> None:
        """Remove each key's value."""
        keys, groups = _resolved(keys, self._batch_keys, self._max_parallelism)
        self._inner.remove_many(keys, groups)


class _PerKeyBatchState:
    """Base of batched list and map state: neither backend has multi-key access for these
    kinds, so each key goes through the per-key handle (`inner`, with TTL if the state has
    one) under `set_current_key`, in order, with the current key set back afterwards.
    Every key is checked against the backend's key groups before anything is read or
    written."""

    __slots__ = ("_backend", "_batch_keys", "_inner")

    def __init__(self, inner: Any, backend: KeyedStateBackend, batch_keys: Any = None) -> None:
        self._inner = inner
        self._backend = backend
        self._batch_keys = batch_keys

    def _each(self, keys: Any, action: Callable[[int], Any]) -> list[Any]:
        """`action(i)` with the i-th key current, for each key in order."""
        backend = self._backend
        keys, groups = _resolved(keys, self._batch_keys, backend.max_parallelism)
        key_group_indices(keys, groups, backend.key_group_range, backend.max_parallelism)
        had_key = backend.current_key_group is not None
        current = backend.current_key
        select = type(backend).set_current_key  # no per-record TTL sweeps: no records
        results = []
        try:
            for index, key in enumerate(keys):
                select(backend, key)
                results.append(action(index))
        finally:
            if had_key:
                select(backend, current)
        return results

    def _keys(self, keys: Any) -> Sequence[Any]:
        return keys.to_pylist() if isinstance(keys, pa.Array | pa.ChunkedArray) else keys


class BatchListState(_PerKeyBatchState):
    """A list state read and written for many keys at once (`get_batch_state` with a
    `ListStateDescriptor`); the same results as the per-key `ListState` calls key by key."""

    __slots__ = ()

    def get_many(self, keys: Any) -> list[list[Any]]:
        """Each key's elements (an empty list where it has none), in the order of `keys`."""
        get = self._inner.get
        return self._each(keys, lambda _: get())

    def add_many(self, keys: Any, values: Sequence[Any]) -> None:
        """Append `values[i]` to the list of `keys[i]`, in order."""
        values = _checked_length("values", values, self._keys(keys))
        add = self._inner.add
        self._each(keys, lambda i: add(values[i]))

    def update_many(self, keys: Any, lists: Sequence[Any]) -> None:
        """Replace each key's list by `lists[i]` (an empty list or None removes it)."""
        lists = _checked_length("lists", lists, self._keys(keys))
        update = self._inner.update
        self._each(keys, lambda i: update(lists[i]))

    def remove_many(self, keys: Any) -> None:
        """Remove each key's list."""
        clear = self._inner.clear
        self._each(keys, lambda _: clear())


class BatchMapState(_PerKeyBatchState):
    """A map state read and written for many keys at once (`get_batch_state` with a
    `MapStateDescriptor`): `map_keys` gives one map key per key (a list or an Arrow
    array; `[map_key] * len(keys)` for the same one); the same results as the per-key
    `MapState` calls key by key."""

    __slots__ = ()

    def get_many(self, keys: Any, map_keys: Sequence[Any]) -> list[Any]:
        """The value of `map_keys[i]` in the map of `keys[i]` (None where there is none)."""
        map_keys = _checked_length("map keys", map_keys, self._keys(keys))
        get = self._inner.get
        return self._each(keys, lambda i: get(map_keys[i]))

    def contains_many(self, keys: Any, map_keys: Sequence[Any]) -> list[bool]:
        """Whether the map of `keys[i]` has `map_keys[i]`."""
        map_keys = _checked_length("map keys", map_keys, self._keys(keys))
        contains = self._inner.contains
        return self._each(keys, lambda i: contains(map_keys[i]))

    def put_many(self, keys: Any, map_keys: Sequence[Any], values: Sequence[Any]) -> None:
        """Set `map_keys[i]` to `values[i]` in the map of `keys[i]`, in order."""
        count = self._keys(keys)
        map_keys = _checked_length("map keys", map_keys, count)
        values = _checked_length("values", values, count)
        put = self._inner.put
        self._each(keys, lambda i: put(map_keys[i], values[i]))

    def remove_many(self, keys: Any, map_keys: Sequence[Any]) -> None:
        """Remove `map_keys[i]` from the map of `keys[i]`."""
        map_keys = _checked_length("map keys", map_keys, self._keys(keys))
        remove = self._inner.remove
        self._each(keys, lambda i: remove(map_keys[i]))

    def items_many(self, keys: Any) -> list[dict[Any, Any]]:
        """Each key's whole map as a dict (empty where it has none)."""
        items = self._inner.items
        return self._each(keys, lambda _: dict(items()))

    def clear_many(self, keys: Any) -> None:
        """Remove each key's whole map."""
        clear = self._inner.clear
        self._each(keys, lambda _: clear())
