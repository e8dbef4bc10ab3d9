"""Batched value-state access: the key-group indices of many keys at once, and the handle
a `KeyedBatchFunction` gets (`get_many`, `put_many`, `remove_many`).

A keyed step that takes a batch reads and writes the state of all its keys in a few calls
instead of one Python call per record through `set_current_key` and `value()`: the heap
backend does a dict operation per key in one pass, RocksDB one multi-get and one
WriteBatch. Both backends' value-state handles have the three methods with the same
contract (below); `BatchValueState` is what user code holds.

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

from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

import numpy as np
import pyarrow as pa

from barrierflow.errors import ConfigurationError, StreamCorruptionError
from barrierflow.state.key_group_arrays import key_groups_of_array
from barrierflow.state.key_groups import KeyGroupRange, stable_hash

__all__ = ["BatchValueState", "MultiKeyValueState", "key_group_indices"]


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


class BatchValueState:
    """A value state read and written for many keys at once (`KeyedBatchFunction`).

    `keys` may be a list of Python keys or a pyarrow Array (hashed vectorized, then
    converted once). Passing the batch's own key list (`ctx.keys`) reuses the key groups
    the operator computed for the batch.
    """

    __slots__ = ("_batch_keys", "_inner", "_max_parallelism")

    def __init__(self, inner: Any, batch_keys: Any = None) -> None:
        self._inner = inner
        self._batch_keys = batch_keys
        """Callable -> (keys list, key groups) of the batch being processed, or None."""
        self._max_parallelism = inner._backend.max_parallelism

    def _resolve(self, keys: Any) -> tuple[Sequence[Any], Any]:
        if isinstance(keys, pa.Array | pa.ChunkedArray):
            return keys.to_pylist(), key_groups_of_array(keys, self._max_parallelism)
        if self._batch_keys is not None:
            batch_keys, groups = self._batch_keys()
            if keys is batch_keys:
                return keys, groups
            if groups is not None:  # some of the batch's keys (its distinct keys, say)
                return keys, _groups_of_batch_keys(keys, batch_keys, groups)
        return keys, None

    def get_many(self, keys: Any) -> list[Any]:
        """Each key's value (None where it has none), in the order of `keys`."""
        keys, groups = self._resolve(keys)
        return self._inner.get_many(keys, groups)

    def put_many(self, keys: Any, values: Sequence[Any]) -> None:
        """Set each key's value, in order (None removes it)."""
        keys, groups = self._resolve(keys)
        if len(values) != len(keys):
            raise ValueError(f"put_many got {len(values)} values for {len(keys)} keys")
        self._inner.put_many(keys, values, groups)

    def remove_many(self, keys: Any) -> None:
        """Remove each key's value."""
        keys, groups = self._resolve(keys)
        self._inner.remove_many(keys, groups)
