"""Batched state beyond plain value state, event by event on both backends and a manual
processing-time clock: value state with TTL (`get_many` / `put_many` / `remove_many` under
each update type and visibility, checked against the per-key TTL handle doing the same key
by key), batched list and map state (with and without TTL), and the incremental cleanup's
`run_cleanup_for_every_record` (the sweep runs on every key selection and for every record
of a batch, `size` keys each time).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.clocks import ManualClock
from support.ttl import (
    NEVER,
    ON_READ,
    ON_WRITE,
    RETURN_EXPIRED,
    T0,
    TTL,
    clock_at,
    config,
    with_ttl,
)

from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend, HashMapStateBackend
from barrierflow.errors import StreamCorruptionError
from barrierflow.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.batched import BatchListState, BatchMapState, BatchValueState
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group
from barrierflow.state.ttl import records_processed, ttl_record

MAX_P = 128


@pytest.fixture(params=["hashmap", "rocksdb"])
def backends(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Any]:
    """Makes backends of the parametrized kind, as an operator builds them."""
    made: list[Any] = []
    settings_ = (
        HashMapStateBackend() if request.param == "hashmap" else EmbeddedRocksDBStateBackend()
    )

    def make(key_groups: KeyGroupRange | None = None) -> Any:
        backend = create_keyed_backend(
            settings_, key_groups or KeyGroupRange(0, MAX_P - 1), MAX_P, tmp_path / f"db{len(made)}"
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.dispose()


def batch_value(backend: Any, clock: ManualClock, builder: Any, name: str = "v") -> BatchValueState:
    handle = keyed_state_handle(backend, with_ttl(ValueStateDescriptor(name), builder), clock)
    return BatchValueState(handle, max_parallelism=backend.max_parallelism)


def raw_value(backend: Any, key: Any, name: str = "v") -> Any:
    """What the backend stores for `key`, read without TTL."""
    backend.set_current_key(key)
    return backend.get_value_state(ValueStateDescriptor(name)).value()


# ---- value state with TTL, batched ----------------------------------------------------------


def test_batched_values_expire_exactly_ttl_after_their_write(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config())
    state.put_many(["a", "b", 3], [1, 2, 3])
    assert raw_value(backend, "a") == ttl_record(1, T0)
    clock.now = T0 + 40
    state.put_many(["b"], [20])  # a write restarts b's time
    clock.now = T0 + TTL - 1
    assert state.get_many(["a", "b", 3, "none"]) == [1, 20, 3, None]
    clock.now = T0 + TTL  # a and 3 expire now; reads (OnCreateAndWrite) extended nothing
    assert state.get_many([3, "b", "a"]) == [None, 20, None]
    assert sorted(map(str, backend.keys("v"))) == ["b"]  # the read removed what expired
    clock.now = T0 + 40 + TTL
    assert state.get_many(["b"]) == [None]
    assert list(backend.keys("v")) == []


def test_batched_put_none_and_remove_many_remove(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config())
    state.put_many(["a", "b", "c"], [1, 2, 3])
    state.put_many(["a", "c"], [None, 30])
    state.remove_many(["b"])
    assert state.get_many(["a", "b", "c"]) == [None, None, 30]
    assert raw_value(backend, "c") == ttl_record(30, T0)


def test_on_read_and_write_a_batched_read_extends_only_the_keys_read(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config(ON_READ))
    state.put_many(["a", "b"], ["x", "y"])
    clock.now = T0 + 60
    assert state.get_many(["a"]) == ["x"]
    assert raw_value(backend, "a") == ttl_record("x", T0 + 60)
    clock.now = T0 + TTL
    assert state.get_many(["a", "b"]) == ["x", None]
    clock.now = T0 + 60 + TTL  # a's read at T0 + TTL extended it again
    assert state.get_many(["a"]) == ["x"]
    clock.now = T0 + 2 * TTL  # last read at T0 + 60 + TTL
    assert state.get_many(["a"]) == ["x"]
    clock.now = T0 + 60 + 3 * TTL
    assert state.get_many(["a"]) == [None]


def test_return_expired_if_not_cleaned_up_returns_an_expired_value_once(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config(visibility=RETURN_EXPIRED))
    state.put_many(["a", "b"], [1, 2])
    clock.now = T0 + TTL
    # the first read of a key returns it and removes it; a repeat in the same call does not
    assert state.get_many(["a", "a", "b"]) == [1, None, 2]
    assert state.get_many(["a", "b"]) == [None, None]
    assert list(backend.keys("v")) == []


def test_never_return_expired_with_duplicates_and_arrow_keys(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config())
    state.put_many(pa.array([5, 6]), ["five", "six"])
    clock.now = T0 + 50
    state.put_many([6], ["six again"])
    clock.now = T0 + TTL
    assert state.get_many(pa.array([5, 6, 5, 6])) == [None, "six again", None, "six again"]


def test_a_restore_never_returns_batched_values_that_expired(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config())
    state.put_many(["old"], [1])
    clock.now = T0 + 50
    state.put_many(["new"], [2])
    restored = backends()
    restored.restore([canonical_bytes(backend)])
    clock.now = T0 + TTL
    again = batch_value(restored, clock, config())
    assert again.get_many(["old", "new"]) == [None, 2]


ops = st.lists(
    st.tuples(
        st.sampled_from(["get", "put", "remove", "tick"]),
        st.lists(st.sampled_from(["a", "b", "c", 1, 2]), max_size=5),
    ),
    max_size=30,
)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops, st.sampled_from([ON_WRITE, ON_READ]), st.sampled_from([NEVER, RETURN_EXPIRED]), st.data()
)
def test_batched_ttl_calls_read_and_store_what_per_key_calls_do(
    backends: Any, steps: list, update: Any, visibility: Any, data: Any
) -> None:
    """Any sequence of batched calls gives the results, and leaves the stored records, of
    the per-key TTL handle doing the same calls key by key in order."""
    batched_backend, single_backend, clock = backends(), backends(), clock_at()
    try:
        batched = batch_value(batched_backend, clock, config(update, visibility))
        single = keyed_state_handle(
            single_backend, with_ttl(ValueStateDescriptor("v"), config(update, visibility)), clock
        )
        for step, (kind, keys) in enumerate(steps):
            if kind == "tick":
                clock.now += data.draw(st.integers(0, TTL), label="tick")
                continue
            if kind == "get":
                expected = []
                for key in keys:
                    single_backend.set_current_key(key)
                    expected.append(single.value())
                assert batched.get_many(keys) == expected
            elif kind == "put":
                values = [None if i == 2 else (step, i) for i in range(len(keys))]
                batched.put_many(keys, values)
                for key, value in zip(keys, values, strict=True):
                    single_backend.set_current_key(key)
                    single.update(value)
            else:
                batched.remove_many(keys)
                for key in keys:
                    single_backend.set_current_key(key)
                    single.clear()
            for key in ["a", "b", "c", 1, 2]:
                assert raw_value(batched_backend, key) == raw_value(single_backend, key)
    finally:  # each example's databases closed now, not at the end of the test
        batched_backend.dispose()
        single_backend.dispose()


def test_batched_calls_run_the_sweep_once_per_key(backends: Any) -> None:
    """Incremental cleanup checks `size` other keys per access; a batched call for n keys is
    n accesses (the value state's sweep checks them in one multi-get)."""
    backend, clock = backends(), clock_at()
    state = batch_value(backend, clock, config().cleanup_incrementally(2, False))
    old = [f"old-{i}" for i in range(10)]
    state.put_many(old, list(range(10)))
    clock.now = T0 + 50
    state.put_many(["live"], [1])  # a pass over all 11 keys ran; the sweep rests until T0+TTL
    clock.now = T0 + TTL
    assert state.get_many(["live", "live"]) == [1, 1]  # 2 accesses x 2 keys checked
    assert len(list(backend.keys("v"))) in (7, 8)  # "live" may be one of the four
    state.get_many(["live"] * 4)  # 8 more keys checked: every expired one is gone
    assert list(backend.keys("v")) == ["live"]


# ---- batched list state ---------------------------------------------------------------------


def batch_list(backend: Any, clock: ManualClock, builder: Any) -> BatchListState:
    handle = keyed_state_handle(backend, with_ttl(ListStateDescriptor("l"), builder), clock)
    return BatchListState(handle, backend)


def batch_map(backend: Any, clock: ManualClock, builder: Any) -> BatchMapState:
    handle = keyed_state_handle(backend, with_ttl(MapStateDescriptor("m"), builder), clock)
    return BatchMapState(handle, backend)


@pytest.mark.parametrize("ttl", [None, config()], ids=["plain", "ttl"])
def test_batched_list_state_event_by_event(backends: Any, ttl: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_list(backend, clock, ttl)
    assert state.get_many(["a", "b"]) == [[], []]
    state.add_many(["a", "b", "a"], [1, 2, 3])  # in order: a gets 1 then 3
    assert state.get_many(["b", "a"]) == [[2], [1, 3]]
    state.update_many(["b", "c"], [[7, 8], []])
    state.remove_many(["a"])
    assert state.get_many(["a", "b", "c"]) == [[], [7, 8], []]
    single = keyed_state_handle(backend, ListStateDescriptor("l"), clock) if ttl is None else None
    if single is not None:  # the per-key handle sees the same lists
        backend.set_current_key("b")
        assert single.get() == [7, 8]
    with pytest.raises(ValueError, match="got 1 values for 2 keys"):
        state.add_many(["a", "b"], [1])
    with pytest.raises(ValueError, match="cannot add None"):
        state.add_many(["a"], [None])


def test_batched_list_elements_expire_one_by_one(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_list(backend, clock, config())
    state.add_many(["a", "b"], ["early", "early"])
    clock.now = T0 + 50
    state.add_many(["a"], ["late"])
    clock.now = T0 + TTL
    assert state.get_many(["a", "b"]) == [["late"], []]
    clock.now = T0 + 50 + TTL
    assert state.get_many(["a"]) == [[]]
    assert list(backend.keys("l")) == []


def test_batched_list_and_map_calls_keep_the_current_key_and_check_keys_first(
    backends: Any,
) -> None:
    mine = KeyGroupRange(0, 63)
    backend, clock = backends(mine), clock_at()
    lists, maps = batch_list(backend, clock, None), batch_map(backend, clock, None)
    inside = [k for k in range(1000) if assign_to_key_group(k, MAX_P) <= 63][:3]
    outside = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) > 63)
    backend.set_current_key(inside[0])
    lists.add_many(inside[1:], ["x", "y"])
    maps.put_many(inside[1:], ["k", "k"], [1, 2])
    assert backend.current_key == inside[0]
    with pytest.raises(StreamCorruptionError, match=f"key {outside} is in key group"):
        lists.add_many([inside[0], outside], ["never", "never"])
    with pytest.raises(StreamCorruptionError):
        maps.put_many([inside[0], outside], ["k", "k"], [0, 0])
    assert lists.get_many([inside[0]]) == [[]]  # nothing was written for the first key
    assert maps.get_many([inside[0]], ["k"]) == [None]
    assert backend.current_key == inside[0]


# ---- batched map state ----------------------------------------------------------------------


@pytest.mark.parametrize("ttl", [None, config()], ids=["plain", "ttl"])
def test_batched_map_state_event_by_event(backends: Any, ttl: Any) -> None:
    backend, clock = backends(), clock_at()
    state = batch_map(backend, clock, ttl)
    state.put_many(["a", "a", "b"], ["x", "y", "x"], [1, 2, 3])
    assert state.get_many(["a", "b", "b", "c"], ["y", "x", "y", "x"]) == [2, 3, None, None]
    assert state.contains_many(["a", "b"], pa.array(["x", "y"])) == [True, False]
    state.put_many(["a"], ["x"], [10])  # a later write wins
    state.remove_many(["a"], ["y"])
    assert state.items_many(["a", "b", "c"]) == [{"x": 10}, {"x": 3}, {}]
    state.clear_many(["a"])
    assert state.items_many(["a", "b"]) == [{}, {"x": 3}]
    with pytest.raises(ValueError, match="got 1 map keys for 2 keys"):
        state.get_many(["a", "b"], ["x"])
    with pytest.raises(TypeError, match="one item per key"):
        state.get_many(["a", "b"], "xy")


def test_batched_map_entries_expire_one_by_one_and_on_read_extends_them(
    backends: Any,
) -> None:
    backend, clock = backends(), clock_at()
    state = batch_map(backend, clock, config(ON_READ))
    state.put_many(["a", "a"], ["read", "unread"], [1, 2])
    clock.now = T0 + 60
    assert state.get_many(["a"], ["read"]) == [1]
    clock.now = T0 + TTL
    assert state.items_many(["a"]) == [{"read": 1}]


# ---- run_cleanup_for_every_record -----------------------------------------------------------


def stored_keys(backend: Any, name: str) -> int:
    return len(list(backend.keys(name)))


@pytest.mark.parametrize("kind", ["value", "list"])
def test_the_sweep_runs_on_every_record_only_when_asked(backends: Any, kind: str) -> None:
    """With run_cleanup_for_every_record, every key selection (a record) checks `size` keys,
    even when the record never touches the state; without it, only accesses do."""
    for per_record, name in ((True, "every"), (False, "accesses")):
        backend, clock = backends(), clock_at()
        builder = config().cleanup_incrementally(2, per_record)
        if kind == "value":
            descriptor: Any = ValueStateDescriptor(name)
        else:
            descriptor = ListStateDescriptor(name)
        handle = keyed_state_handle(backend, with_ttl(descriptor, builder), clock)
        for i in range(6):
            backend.set_current_key(f"k{i}")
            handle.update(i) if kind == "value" else handle.add(i)
        clock.now = T0 + TTL
        backend.set_current_key("other")  # a record for another key, no state access
        assert backend.current_key == "other"  # the sweep set the record's key back
        assert stored_keys(backend, name) == (4 if per_record else 6)
        backend.set_current_key("other")
        assert stored_keys(backend, name) == (2 if per_record else 6)
        records_processed(backend, 1)  # a batch of one record (keyed batch operator)
        assert stored_keys(backend, name) == (0 if per_record else 6)
        assert backend.current_key == "other"


def test_a_batch_of_records_runs_the_sweep_once_per_record(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    builder = config().cleanup_incrementally(1, True)
    state = batch_value(backend, clock, builder)
    state.put_many([f"k{i}" for i in range(8)], list(range(8)))
    clock.now = T0 + TTL
    records_processed(backend, 3)
    assert stored_keys(backend, "v") == 5
    records_processed(backend, 0)
    assert stored_keys(backend, "v") == 5
    records_processed(backend, 10)
    assert stored_keys(backend, "v") == 0


def test_per_record_sweeps_of_several_states_each_check_their_own_keys(backends: Any) -> None:
    backend, clock = backends(), clock_at()
    values = keyed_state_handle(
        backend, with_ttl(ValueStateDescriptor("v"), config().cleanup_incrementally(1, True)), clock
    )
    maps = keyed_state_handle(
        backend, with_ttl(MapStateDescriptor("m"), config().cleanup_incrementally(2, True)), clock
    )
    for i in range(4):
        backend.set_current_key(i)
        values.update(i)
        maps.put("e", i)
    clock.now = T0 + TTL
    backend.set_current_key("x")
    assert (stored_keys(backend, "v"), stored_keys(backend, "m")) == (3, 2)
    backend.set_current_key("y")
    assert (stored_keys(backend, "v"), stored_keys(backend, "m")) == (2, 0)
