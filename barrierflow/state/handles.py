"""The state handle a user function gets for any descriptor, over any keyed backend.

Value, list and map state are the backend's own handles; reducing and aggregating state
are handles over a backend value state of the same name (`state/folding.py`); a
descriptor with `enable_time_to_live(...)` gets a TTL handle around the backend's
(`state/ttl.py`), with the cleanups its `StateTtlConfig` asks for registered here: the
full-snapshot filter on the backend, the incremental sweep on the handle (and, with
`run_cleanup_for_every_record`, on every record the backend is scoped to).

>>> from barrierflow.core.state_descriptors import ReducingStateDescriptor
>>> from barrierflow.state.heap_backend import HeapKeyedStateBackend
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
>>> total = keyed_state_handle(backend, ReducingStateDescriptor("sum", lambda a, b: a + b), None)
>>> backend.set_current_key("a")
>>> total.add(2); total.add(5); total.get()
7
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from barrierflow.core.state_descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.core.state_ttl import DEFAULT_INCREMENTAL_CLEANUP_SIZE, StateTtlConfig
from barrierflow.errors import ConfigurationError
from barrierflow.state.folding import ValueAggregatingState, ValueReducingState
from barrierflow.state.ttl import (
    Clock,
    IncrementalSweep,
    SnapshotFilter,
    live_list,
    live_map,
    live_value,
    sweep_on_every_record,
)
from barrierflow.state.ttl_states import TtlListState, TtlMapState, TtlValueState
from barrierflow.state.values import State

if TYPE_CHECKING:
    from barrierflow.state.backend import KeyedStateBackend


def keyed_state_handle(
    backend: KeyedStateBackend, descriptor: StateDescriptor, clock: Clock | None
) -> State:
    """The handle for `descriptor` over `backend`; `clock` (epoch ms, the operator's
    processing time) is needed only for a descriptor with TTL. ConfigurationError for
    anything that is no state descriptor."""
    ttl = descriptor.time_to_live() if isinstance(descriptor, StateDescriptor) else None
    if ttl is not None and clock is None:
        raise ConfigurationError(
            f"state {descriptor.name!r} has a TTL, which needs the operator's processing-time "
            "clock; none is available here"
        )
    if isinstance(descriptor, ReducingStateDescriptor | AggregatingStateDescriptor):
        value = _value_state(backend, ValueStateDescriptor(descriptor.name), ttl, clock)
        if isinstance(descriptor, ReducingStateDescriptor):
            return ValueReducingState(value, descriptor.reducer())
        return ValueAggregatingState(value, descriptor.get_agg_function())
    if isinstance(descriptor, ValueStateDescriptor):
        return _value_state(backend, descriptor, ttl, clock)
    if isinstance(descriptor, ListStateDescriptor):
        inner = backend.get_list_state(descriptor)
        if ttl is None:
            return inner
        return _with_cleanups(
            backend, TtlListState(inner, descriptor.name, ttl, clock), ttl, live_list
        )  # type: ignore[arg-type]
    if isinstance(descriptor, MapStateDescriptor):
        inner = backend.get_map_state(descriptor)
        if ttl is None:
            return inner
        return _with_cleanups(
            backend, TtlMapState(inner, descriptor.name, ttl, clock), ttl, live_map
        )  # type: ignore[arg-type]
    raise ConfigurationError(f"expected a state descriptor, got {descriptor!r:.200}")


def _value_state(
    backend: KeyedStateBackend,
    descriptor: ValueStateDescriptor,
    ttl: StateTtlConfig | None,
    clock: Clock | None,
) -> Any:
    inner = backend.get_value_state(descriptor)
    if ttl is None:
        return inner
    assert clock is not None
    return _with_cleanups(
        backend, TtlValueState(inner, descriptor.name, ttl, clock), ttl, live_value
    )


def _with_cleanups(
    backend: KeyedStateBackend,
    handle: TtlValueState | TtlListState | TtlMapState,
    ttl: StateTtlConfig,
    live: Callable[[Any, int, int], Any],
) -> Any:
    """Register the cleanups `ttl` asks for on `handle` and `backend`; returns `handle`."""
    name = handle._name
    strategies = ttl.get_cleanup_strategies()
    if strategies.in_full_snapshot():
        backend.set_snapshot_filter(
            name, SnapshotFilter(live, ttl.get_ttl().to_milliseconds(), handle._clock)
        )
    size = sweep_size(ttl)
    if size:
        batched = isinstance(handle, TtlValueState) and hasattr(handle._inner, "get_many")
        sweep = IncrementalSweep(
            backend,
            name,
            size,
            ttl.get_ttl().to_milliseconds(),
            handle.purge_current,
            handle.purge_many if batched else None,  # type: ignore[union-attr]
        )
        handle.sweep_with(sweep)
        incremental = strategies.get_incremental_cleanup_strategy()
        if incremental is not None and incremental.run_cleanup_for_every_record():
            sweep_on_every_record(backend, sweep, handle._clock)
    return handle


def sweep_size(ttl: StateTtlConfig) -> int:
    """Keys the incremental sweep checks per access: the incremental strategy's size (Flink's
    default 5 while background cleanup is on); the RocksDB compaction filter, which
    rocksdict cannot run, is stood in for by a sweep of the default size."""
    strategies = ttl.get_cleanup_strategies()
    incremental = strategies.get_incremental_cleanup_strategy()
    if incremental is not None:
        return incremental.get_cleanup_size()
    if strategies.get_rocksdb_compact_filter_cleanup_strategy() is not None:
        return DEFAULT_INCREMENTAL_CLEANUP_SIZE
    return 0
