"""Batched value-state access (`get_many`, `put_many`, `remove_many`) on both backends.

Each backend is built as an operator builds it (`create_keyed_backend`). Checked event by
event against what `set_current_key` + `value()` / `update()` read and write (the two paths
see the same state), with duplicates, None, misrouted and unhashable keys, through a
canonical snapshot and restore, and, on the heap backend, with snapshots in flight: a
batched write after the barrier never reaches the snapshot (copy-on-write).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
)
from barrierflow.errors import ConfigurationError, StreamCorruptionError
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backend import KeyedStateBackend, canonical_bytes
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.batched import BatchValueState
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_group_arrays import key_groups_of_array
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group

MAX_P = 128
ALL = KeyGroupRange(0, MAX_P - 1)

BACKENDS = [
    pytest.param(HashMapStateBackend(), id="hashmap"),
    pytest.param(EmbeddedRocksDBStateBackend(), id="rocksdb"),
    # batched access goes through the write-back cache: with 4 entries it evicts all the time
    pytest.param(EmbeddedRocksDBStateBackend(write_cache_entries=4), id="rocksdb-cache-4"),
    pytest.param(EmbeddedRocksDBStateBackend(write_cache_entries=0), id="rocksdb-no-cache"),
]


@pytest.fixture(params=BACKENDS)
def make(request: Any, tmp_path: Path) -> Any:
    made: list[KeyedStateBackend] = []

    def new(key_group_range: KeyGroupRange = ALL) -> KeyedStateBackend:
        backend = create_keyed_backend(request.param, key_group_range, MAX_P, tmp_path)
        made.append(backend)
        return backend

    yield new
    for backend in made:
        backend.dispose()


def one_by_one(backend: KeyedStateBackend, name: str, keys: list[Any]) -> list[Any]:
    state = backend.get_value_state(ValueStateDescriptor(name))
    out = []
    for key in keys:
        backend.set_current_key(key)
        out.append(state.value())
    return out


def test_get_put_remove_many_event_by_event(make: Any) -> None:
    backend = make()
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    assert state.get_many([]) == []
    assert state.get_many(["a", 1, (2, 3)]) == [None, None, None]

    state.put_many(["a", 1, (2, 3)], [10, "x", [1, 2]])
    assert state.get_many([(2, 3), "a", "nope", 1]) == [[1, 2], 10, None, "x"]
    assert one_by_one(backend, "v", ["a", 1, (2, 3)]) == [10, "x", [1, 2]]

    # duplicates: applied in order, the last write wins; None removes
    state.put_many(["a", "a", 1], [11, 12, None])
    assert state.get_many(["a", 1, "a"]) == [12, None, 12]

    # per-record writes are seen by batched reads
    single = backend.get_value_state(ValueStateDescriptor("v"))
    backend.set_current_key("b")
    single.update(7)
    assert state.get_many(["b"]) == [7]
    assert backend.current_key == "b"  # batched calls never move the current key
    state.put_many(["c"], [3])
    assert backend.current_key == "b" and single.value() == 7

    state.remove_many(["a", "missing", "b"])
    assert state.get_many(["a", "b", "c", (2, 3)]) == [None, None, 3, [1, 2]]
    assert sorted(map(repr, backend.keys("v"))) == sorted(map(repr, ["c", (2, 3)]))


def test_arrow_keys_and_given_key_groups(make: Any) -> None:
    backend = make()
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    column = pa.array([5, 6, 5, 2**40])
    state.put_many(column, [1, 2, 3, 4])
    assert state.get_many([5, 6, 2**40]) == [3, 2, 4]
    inner = backend.get_value_state(ValueStateDescriptor("v"))
    groups = key_groups_of_array(column, MAX_P)
    assert inner.get_many([5, 6, 5, 2**40], groups) == [3, 2, 3, 4]
    with pytest.raises(ValueError, match="2 values for 1 keys"):
        state.put_many([1], [1, 2])


def test_a_key_outside_the_range_is_refused_before_anything_is_written(make: Any) -> None:
    mine = KeyGroupRange(0, 63)
    backend = make(mine)
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    inside = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) <= 63)
    outside = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) > 63)
    with pytest.raises(StreamCorruptionError, match=f"key {outside} is in key group"):
        state.put_many([inside, outside], [1, 2])
    assert state.get_many([inside]) == [None]
    with pytest.raises(StreamCorruptionError):
        state.get_many([outside])
    with pytest.raises(StreamCorruptionError):
        state.remove_many([outside])


def test_unhashable_key_and_unpicklable_value_say_so(make: Any) -> None:
    backend = make()
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    with pytest.raises(ConfigurationError, match="hashable"):
        state.put_many([[1, 2]], [1])
    if not isinstance(backend, HeapKeyedStateBackend):
        with pytest.raises(ConfigurationError, match="'v' for key 'k' cannot be pickled"):
            state.put_many(["k"], [lambda: 1])


def test_batched_writes_survive_a_snapshot_and_restore(make: Any) -> None:
    backend = make()
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    keys = list(range(300))
    state.put_many(keys, [k * 2 for k in keys])
    state.remove_many(keys[::3])
    restored = make()
    restored.restore([canonical_bytes(backend)])
    again = BatchValueState(restored.get_value_state(ValueStateDescriptor("v")))
    assert again.get_many(keys) == [None if k % 3 == 0 else k * 2 for k in keys]


def test_batched_values_are_fresh_objects_and_large_ones_round_trip(make: Any) -> None:
    """A mutable value read is a copy on the on-disk backend (changing it changes nothing
    stored) and a value over the cache's size limit is written and read through it."""
    backend = make()
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    large = "x" * 1000
    state.put_many(["m", "big", "n"], [[1], large, 2])
    got = state.get_many(["m", "big", "m", "n"])
    assert got == [[1], large, [1], 2]
    assert got[0] is not got[2] or isinstance(backend, HeapKeyedStateBackend)
    got[0].append(9)
    if not isinstance(backend, HeapKeyedStateBackend):
        assert state.get_many(["m"]) == [[1]]
    state.put_many(["big", "big"], [large + "y", "small"])
    assert state.get_many(["big"]) == ["small"]
    state.put_many(["big"], [large])
    restored = make()
    restored.restore([canonical_bytes(backend)])
    again = BatchValueState(restored.get_value_state(ValueStateDescriptor("v")))
    assert again.get_many(["big", "n", "none"]) == [large, 2, None]


def test_batched_and_per_record_snapshots_are_equal(make: Any) -> None:
    """The same writes, once batched and once per record, snapshot to the same bytes (the
    batched ones reach RocksDB before the snapshot, also from the write-back cache)."""
    batched, single = make(), make()
    state = BatchValueState(batched.get_value_state(ValueStateDescriptor("v")))
    handle = single.get_value_state(ValueStateDescriptor("v"))
    for round_ in range(3):
        keys = [k for k in range(40) if k % (round_ + 2)] + ["a", (1, "b")]
        values = [None if k == 5 else (k, round_) for k in keys]
        before = state.get_many(keys)
        state.put_many(keys, values)
        for key, value in zip(keys, values, strict=True):
            single.set_current_key(key)
            assert handle.value() == before[keys.index(key)]
            handle.update(value)
        state.remove_many(keys[::7])
        for key in keys[::7]:
            single.set_current_key(key)
            handle.clear()
        assert canonical_bytes(batched) == canonical_bytes(single)


actions = st.lists(
    st.tuples(
        st.sampled_from(["put", "remove", "single"]),
        st.lists(st.integers(0, 12) | st.text(max_size=2), max_size=8),
        st.integers(-3, 3),
    ),
    max_size=25,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(actions)
def test_batched_and_per_record_access_keep_the_same_state(make: Any, steps: list) -> None:
    """Any mix of batched and per-record writes reads back as a dict model says, through
    both paths."""
    backend = make()
    name = "m"
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor(name)))
    single = backend.get_value_state(ValueStateDescriptor(name))
    model: dict[Any, Any] = {}
    for kind, keys, value in steps:
        if kind == "put":
            values = [None if value == 0 else (value, i) for i in range(len(keys))]
            state.put_many(keys, values)
            for key, v in zip(keys, values, strict=True):
                if v is None:
                    model.pop(key, None)
                else:
                    model[key] = v
        elif kind == "remove":
            state.remove_many(keys)
            for key in keys:
                model.pop(key, None)
        else:
            for key in keys:
                backend.set_current_key(key)
                single.update(value or None)
                if value:
                    model[key] = value
                else:
                    model.pop(key, None)
        probe = keys + list(model)
        assert state.get_many(probe) == [model.get(k) for k in probe]
        assert one_by_one(backend, name, probe) == [model.get(k) for k in probe]
    for key in list(model):
        backend.set_current_key(key)
        single.clear()


# ---- heap copy-on-write ------------------------------------------------------------------------


def test_heap_batched_writes_after_the_barrier_never_reach_the_snapshot() -> None:
    backend = HeapKeyedStateBackend(ALL, MAX_P)
    state = BatchValueState(backend.get_value_state(ValueStateDescriptor("v")))
    keys = list(range(200))
    state.put_many(keys, [[k] for k in keys])  # mutable values: copied on read after a barrier
    first = backend.snapshot(1)
    state.put_many(keys[:100], ["new"] * 100)
    state.remove_many(keys[100:150])
    read = state.get_many(keys[150:])
    for value in read:
        value.append("changed in place")  # a value read after the barrier is the reader's copy
    second = backend.snapshot(2)  # two snapshots in flight
    state.put_many(keys[150:], [0] * 50)
    state.put_many([1000], [1])

    def restored(snapshot: Any) -> list[Any]:
        target = HeapKeyedStateBackend(ALL, MAX_P)
        target.restore([snapshot.write(None)])
        snapshot.release()
        view = BatchValueState(target.get_value_state(ValueStateDescriptor("v")))
        return view.get_many([*keys, 1000])

    assert restored(first) == [[k] for k in keys] + [None]
    assert restored(second) == (
        ["new"] * 100 + [None] * 50 + [[k, "changed in place"] for k in keys[150:]] + [None]
    )
    assert state.get_many([*keys, 1000]) == ["new"] * 100 + [None] * 50 + [0] * 50 + [1]
