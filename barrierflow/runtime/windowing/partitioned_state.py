"""State handles scoped to one (key, namespace), over a `WindowStateAccess`.

What a trigger gets from `ctx.get_partitioned_state(descriptor)` and a
ProcessWindowFunction from `context.window_state()` / `global_state()`: the
state API of `barrierflow.state` (ValueState, ListState, MapState) plus
Flink's `ReducingState` and `AggregatingState`, each stored as one value per (name,
key, namespace). No TTL: window state is cleared with its window.
`merge_namespaces` folds the values of several namespaces into one, as Flink's
`MergingState.mergeNamespaces` does when session windows merge.

>>> from barrierflow.runtime.windowing.window_state import InMemoryWindowState
>>> import operator
>>> access = InMemoryWindowState()
>>> count = partitioned_state(access, ReducingStateDescriptor("count", operator.add), "k", "w")
>>> count.add(1)
>>> count.add(1)
>>> count.get()
2
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from barrierflow.core.state_descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.core.window_functions import KeyedStateStore
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.windowing.window_state import WindowStateAccess
from barrierflow.state.values import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    State,
    ValueState,
    list_values,
)

__all__ = [
    "RESERVED_STATE_NAMES",
    "AggregatingState",
    "AggregatingStateDescriptor",
    "ReducingState",
    "ReducingStateDescriptor",
    "WindowKeyedStateStore",
    "merge_namespaces",
    "merge_values",
    "partitioned_state",
]

RESERVED_STATE_NAMES = frozenset({"window-contents", "merging-window-set"})
"""Names the window logic keeps its own state under; user state cannot take them."""


class _Scoped:
    __slots__ = ("_access", "_key", "_name", "_namespace")

    def __init__(
        self, access: WindowStateAccess, name: str, key: Hashable, namespace: Hashable
    ) -> None:
        self._access = access
        self._name = name
        self._key = key
        self._namespace = namespace

    def _get(self) -> Any:
        return self._access.get(self._name, self._key, self._namespace)

    def _put(self, value: Any) -> None:
        self._access.put(self._name, self._key, self._namespace, value)

    def clear(self) -> None:
        self._access.remove(self._name, self._key, self._namespace)


class _PartitionedValueState(_Scoped, ValueState):
    __slots__ = ()

    def value(self) -> Any:
        return self._get()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._put(value)


class _PartitionedReducingState(_Scoped, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(
        self,
        access: WindowStateAccess,
        name: str,
        key: Hashable,
        namespace: Hashable,
        reduce: Callable[[Any, Any], Any],
    ) -> None:
        super().__init__(access, name, key, namespace)
        self._reduce = reduce

    def get(self) -> Any:
        return self._get()

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ReducingState")
        current = self._get()
        result = value if current is None else self._reduce(current, value)
        if result is None:
            self.clear()
        else:
            self._put(result)


class _PartitionedAggregatingState(_Scoped, AggregatingState):
    __slots__ = ("_function",)

    def __init__(
        self,
        access: WindowStateAccess,
        name: str,
        key: Hashable,
        namespace: Hashable,
        agg_function: Any,
    ) -> None:
        super().__init__(access, name, key, namespace)
        self._function = agg_function

    def get(self) -> Any:
        accumulator = self._get()
        return None if accumulator is None else self._function.get_result(accumulator)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to an AggregatingState")
        accumulator = self._get()
        if accumulator is None:
            accumulator = self._function.create_accumulator()
        result = self._function.add(value, accumulator)
        if result is None:
            self.clear()
        else:
            self._put(result)


class _PartitionedListState(_Scoped, ListState):
    __slots__ = ()

    def get(self) -> list[Any]:
        values = self._get()
        return [] if values is None else list(values)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError("cannot add None to a ListState")
        values = self._get()
        if values is None:
            values = []
        values.append(value)
        self._put(values)

    def add_all(self, values: Iterable[Any] | None) -> None:
        new = list_values(values)
        if new:
            self._put((self._get() or []) + new)

    def update(self, values: Iterable[Any] | None) -> None:
        new = list_values(values)
        if new:
            self._put(new)
        else:
            self.clear()


class _PartitionedMapState(_Scoped, MapState):
    __slots__ = ()

    def _current(self) -> dict[Any, Any]:
        return self._get() or {}

    def get(self, key: Any) -> Any:
        return self._current().get(key)

    def put(self, key: Any, value: Any) -> None:
        current = self._current()
        current[key] = value
        self._put(current)

    def put_all(self, mapping: dict[Any, Any]) -> None:
        if mapping:
            current = self._current()
            current.update(mapping)
            self._put(current)

    def remove(self, key: Any) -> None:
        current = self._current()
        if key in current:
            del current[key]
            if current:
                self._put(current)
            else:
                self.clear()

    def contains(self, key: Any) -> bool:
        return key in self._current()

    def keys(self) -> list[Any]:
        return list(self._current())

    def values(self) -> list[Any]:
        return list(self._current().values())

    def items(self) -> list[tuple[Any, Any]]:
        return list(self._current().items())

    def is_empty(self) -> bool:
        return not self._current()


def _checked_name(descriptor: StateDescriptor) -> str:
    if not isinstance(descriptor, StateDescriptor):
        raise ConfigurationError(f"expected a state descriptor, got {descriptor!r:.200}")
    if descriptor.name in RESERVED_STATE_NAMES:
        raise ConfigurationError(
            f"state name {descriptor.name!r} is used by the window operator itself; "
            "give the state another name"
        )
    if descriptor.time_to_live() is not None:
        raise ConfigurationError(
            f"state {descriptor.name!r} has a TTL; window and trigger state has none (it is "
            "cleared with its window): remove enable_time_to_live from its descriptor"
        )
    return descriptor.name


def partitioned_state(
    access: WindowStateAccess, descriptor: StateDescriptor, key: Hashable, namespace: Hashable
) -> State:
    """The handle for `descriptor`, scoped to `key` and `namespace`."""
    name = _checked_name(descriptor)
    if isinstance(descriptor, ReducingStateDescriptor):
        return _PartitionedReducingState(access, name, key, namespace, descriptor.reducer())
    if isinstance(descriptor, AggregatingStateDescriptor):
        return _PartitionedAggregatingState(
            access, name, key, namespace, descriptor.get_agg_function()
        )
    if isinstance(descriptor, ValueStateDescriptor):
        return _PartitionedValueState(access, name, key, namespace)
    if isinstance(descriptor, ListStateDescriptor):
        return _PartitionedListState(access, name, key, namespace)
    if isinstance(descriptor, MapStateDescriptor):
        return _PartitionedMapState(access, name, key, namespace)
    raise ConfigurationError(f"unsupported state descriptor {descriptor!r:.200}")


def merge_namespaces(
    access: WindowStateAccess,
    descriptor: StateDescriptor,
    key: Hashable,
    target: Hashable,
    sources: Sequence[Hashable],
) -> None:
    """Move the values of `sources` into `target` (Flink's `mergeNamespaces`).

    Only states that can merge: reducing state (the reduce function) and list
    state (concatenation). Sources are folded first, then the result is folded
    into the target's value, and the sources are removed.
    """
    name = _checked_name(descriptor)
    if isinstance(descriptor, ReducingStateDescriptor):
        merge = descriptor.reducer()
    elif isinstance(descriptor, AggregatingStateDescriptor):
        merge = _accumulator_merge(descriptor)
    elif isinstance(descriptor, ListStateDescriptor):
        merge = _concatenate
    else:
        raise ConfigurationError(
            f"state {name!r} cannot be merged: only reducing, aggregating and list state can "
            f"(got {type(descriptor).__name__})"
        )
    merge_values(access, name, merge, key, target, sources)


def _accumulator_merge(descriptor: AggregatingStateDescriptor) -> Callable[[Any, Any], Any]:
    merge = getattr(descriptor.get_agg_function(), "merge", None)
    if not callable(merge):
        raise ConfigurationError(
            f"aggregating state {descriptor.name!r} cannot be merged: its AggregateFunction "
            "has no merge(acc_a, acc_b)"
        )
    return merge


def _concatenate(a: list[Any], b: list[Any]) -> list[Any]:
    return a + b


def merge_values(
    access: WindowStateAccess,
    name: str,
    merge: Callable[[Any, Any], Any],
    key: Hashable,
    target: Hashable,
    sources: Sequence[Hashable],
) -> None:
    """`merge_namespaces` for a state known by name and merge function."""
    merged = None
    for source in sources:
        value = access.get(name, key, source)
        if value is None:
            continue
        access.remove(name, key, source)
        merged = value if merged is None else merge(merged, value)
    if merged is None:
        return
    current = access.get(name, key, target)
    result = merged if current is None else merge(current, merged)
    if result is None:
        access.remove(name, key, target)
    else:
        access.put(name, key, target, result)


class WindowKeyedStateStore(KeyedStateStore):
    """State of one key in one namespace: a window's `window_state()` or `global_state()`."""

    __slots__ = ("_access", "_key", "_namespace")

    def __init__(self, access: WindowStateAccess, key: Hashable, namespace: Hashable) -> None:
        self._access = access
        self._key = key
        self._namespace = namespace

    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState:
        return self._typed(state_descriptor, ValueStateDescriptor)  # type: ignore[return-value]

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState:
        return self._typed(state_descriptor, ListStateDescriptor)  # type: ignore[return-value]

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState:
        return self._typed(state_descriptor, MapStateDescriptor)  # type: ignore[return-value]

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState:
        return self._typed(state_descriptor, ReducingStateDescriptor)  # type: ignore[return-value]

    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState:
        return self._typed(state_descriptor, AggregatingStateDescriptor)  # type: ignore[return-value]

    def _typed(self, descriptor: StateDescriptor, expected: type[StateDescriptor]) -> State:
        if not isinstance(descriptor, expected):
            raise ConfigurationError(f"expected a {expected.__name__}, got {descriptor!r:.200}")
        return partitioned_state(self._access, descriptor, self._key, self._namespace)
