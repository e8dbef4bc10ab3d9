"""The RocksDB value state's write-back cache (`state/rocksdb_cache.py`), event by event
against a real RocksDB in tmp_path: hits, misses, eviction writing dirty entries, deletions
as tombstones, and everything that reads the database directly (snapshot, restore,
keys(), the batched path) seeing the cached writes; TTL expiry through the cache."""

from __future__ import annotations

from typing import Any

import pytest
from support.clocks import ManualClock

from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import ConfigurationError
from barrierflow.state import StateTtlConfig, Time, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group
from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend
from barrierflow.state.rocksdb_cache import LARGE_VALUE, Encoded, cache_key
from barrierflow.state.rocksdb_encoding import decode_value, key_part, state_prefix

MAX_P = 128
ALL = KeyGroupRange(0, MAX_P - 1)


def in_db(backend: RocksDBKeyedStateBackend, key: Any, state_id: int = 0) -> Any:
    """The value RocksDB itself holds for `key` (None if none), bypassing the cache."""
    group = assign_to_key_group(key, MAX_P)
    raw = backend._db.get(state_prefix(group, state_id) + key_part(key))
    return None if raw is None else decode_value(raw)


def counts(backend: RocksDBKeyedStateBackend) -> Any:
    return backend.get_value_state(ValueStateDescriptor("count"))


def put(backend: RocksDBKeyedStateBackend, state: Any, key: Any, value: Any) -> None:
    backend.set_current_key(key)
    state.update(value)


def read(backend: RocksDBKeyedStateBackend, state: Any, key: Any) -> Any:
    backend.set_current_key(key)
    return state.value()


def test_a_write_is_read_back_from_the_cache_and_reaches_rocksdb_at_the_snapshot(make_rocks):
    rocks = make_rocks()
    state = counts(rocks)
    put(rocks, state, "a", 1)
    assert read(rocks, state, "a") == 1
    assert in_db(rocks, "a") is None  # written back later, not through
    rocks.snapshot().release()
    assert in_db(rocks, "a") == 1
    put(rocks, state, "a", 2)
    assert read(rocks, state, "a") == 2 and in_db(rocks, "a") == 1


def test_a_miss_reads_rocksdb_once_and_then_hits(make_rocks):
    rocks = make_rocks()
    state = counts(rocks)
    put(rocks, state, "a", 7)
    rocks.flush_writes()
    state._cache.drop()
    assert read(rocks, state, "a") == 7  # a miss: from RocksDB
    assert state._values == {"a": 7} and not state._dirty  # cached clean
    rocks._db.delete(state_prefix(assign_to_key_group("a", MAX_P), 0) + key_part("a"))
    assert read(rocks, state, "a") == 7  # a hit: RocksDB not read again
    assert read(rocks, state, "absent") is None
    assert state._values["absent"] is None and "absent" not in state._dirty


def test_eviction_writes_the_dirty_entries_oldest_first_and_keeps_the_bound(make_rocks):
    rocks = make_rocks(entries=4)
    state = counts(rocks)
    for number in range(4):
        put(rocks, state, f"k{number}", number)
    assert len(state._values) == 4 and all(in_db(rocks, f"k{n}") is None for n in range(4))
    put(rocks, state, "k4", 4)  # over the limit: the oldest goes, written
    assert len(state._values) <= 4
    assert "k0" not in state._values and in_db(rocks, "k0") == 0
    assert in_db(rocks, "k4") is None  # still only cached
    for number in range(40):
        put(rocks, state, f"k{number}", number * 10)
        assert len(state._values) <= 4
    assert [read(rocks, state, f"k{n}") for n in range(40)] == [n * 10 for n in range(40)]


def test_an_evicted_clean_entry_is_not_written(make_rocks):
    rocks = make_rocks(entries=1)
    state = counts(rocks)
    put(rocks, state, "a", 1)
    rocks.flush_writes()
    assert read(rocks, state, "a") == 1
    rocks._db.put(state_prefix(assign_to_key_group("a", MAX_P), 0) + key_part("a"), b"\x01" * 9)
    assert read(rocks, state, "b") is None  # evicts "a" (clean): RocksDB's bytes stay
    assert rocks._db.get(state_prefix(assign_to_key_group("a", MAX_P), 0) + key_part("a")) == (
        b"\x01" * 9
    )


def test_delete_then_read_is_none_and_the_tombstone_deletes_in_rocksdb(make_rocks):
    rocks = make_rocks()
    state = counts(rocks)
    put(rocks, state, "a", 1)
    rocks.flush_writes()
    rocks.set_current_key("a")
    state.clear()
    assert state.value() is None and in_db(rocks, "a") == 1
    put(rocks, state, "b", 2)
    put(rocks, state, "b", None)  # update(None) is clear()
    assert read(rocks, state, "b") is None
    rocks.flush_writes()
    assert in_db(rocks, "a") is None and in_db(rocks, "b") is None
    assert list(rocks.keys("count")) == []


def test_keys_sees_cached_writes_and_deletions_also_while_iterating(make_rocks):
    rocks = make_rocks(entries=1000)
    state = counts(rocks)
    keys = [f"k{n}" for n in range(200) if assign_to_key_group(f"k{n}", MAX_P) < 64][:30]
    for key in keys:
        put(rocks, state, key, 1)
    put(rocks, state, keys[0], None)
    assert sorted(rocks.keys("count")) == sorted(keys[1:])
    # a write to a key group not read yet is seen, as on the heap backend
    late = next(f"late{n}" for n in range(1000) if assign_to_key_group(f"late{n}", MAX_P) >= 64)
    seen = []
    for key in rocks.keys("count"):
        if not seen:
            put(rocks, state, late, 5)
        seen.append(key)
    assert late in seen


def test_a_savepoint_after_cached_writes_holds_them_and_restores(make_rocks):
    rocks = make_rocks(entries=8)
    state = counts(rocks)
    expected = {f"k{n}": n for n in range(30)}  # some evicted, some only cached
    for key, value in expected.items():
        put(rocks, state, key, value)
    put(rocks, state, "k3", None)
    del expected["k3"]
    heap = HeapKeyedStateBackend(ALL, MAX_P)
    heap.restore([canonical_bytes(rocks)])
    heap_state = heap.get_value_state(ValueStateDescriptor("count"))
    restored = {}
    for key in heap.keys("count"):
        heap.set_current_key(key)
        restored[key] = heap_state.value()
    assert restored == expected
    again = make_rocks(entries=8)
    again.restore([canonical_bytes(rocks)])
    again_state = counts(again)
    assert {key: read(again, again_state, key) for key in expected} == expected
    assert read(again, again_state, "k3") is None


def test_a_restore_replaces_what_the_cache_knew(make_rocks, tmp_path):
    source = make_rocks()
    source_state = counts(source)
    put(source, source_state, "a", 41)
    snapshot = source.snapshot()
    section = snapshot.write(None)
    snapshot.release()
    rocks = make_rocks()
    state = counts(rocks)
    assert read(rocks, state, "a") is None  # cached as absent
    rocks.restore([section])
    assert read(rocks, state, "a") == 41


def test_the_batched_path_sees_cached_writes_and_the_cache_sees_its_writes(make_rocks):
    rocks = make_rocks(entries=100)
    state = counts(rocks)
    put(rocks, state, "a", 1)
    put(rocks, state, "b", None)
    assert state.get_many(["a", "b", "c"]) == [1, None, None]
    assert read(rocks, state, "a") == 1
    put(rocks, state, "d", 4)  # only cached when the batch comes
    state.put_many(["a", "c"], [10, 30])
    assert read(rocks, state, "a") == 10 and read(rocks, state, "c") == 30
    assert read(rocks, state, "d") == 4
    put(rocks, state, "c", 31)
    state.remove_many(["a", "c"])
    assert read(rocks, state, "a") is None and read(rocks, state, "c") is None
    rocks.flush_writes()
    assert in_db(rocks, "c") is None  # the older cached 31 did not overwrite the removal


def test_a_mutable_value_read_is_a_fresh_object_and_a_large_one_is_not_cached(make_rocks):
    rocks = make_rocks()
    state = counts(rocks)
    put(rocks, state, "a", [1, 2])
    assert type(state._values["a"]) is Encoded
    first = read(rocks, state, "a")
    first.append(3)  # not written back: changes nothing (as without the cache)
    assert read(rocks, state, "a") == [1, 2]
    big = "x" * (LARGE_VALUE + 1)
    put(rocks, state, "big", big)
    assert "big" not in state._values and in_db(rocks, "big") == big
    assert read(rocks, state, "big") == big and "big" not in state._values
    with pytest.raises(ConfigurationError, match="cannot be pickled"):
        put(rocks, state, "bad", lambda: None)


def test_keys_equal_as_dict_keys_share_one_entry(make_rocks):
    rocks = make_rocks()
    state = counts(rocks)
    assert cache_key(1) == cache_key(1.0) == cache_key(True) == 1
    put(rocks, state, 1, "one")
    assert read(rocks, state, True) == "one" and read(rocks, state, 1.0) == "one"
    put(rocks, state, (1, "a"), "tuple")
    put(rocks, state, None, "none")
    assert read(rocks, state, (1.0, "a")) == "tuple" and read(rocks, state, None) == "none"
    rocks.flush_writes()
    assert sorted(map(str, rocks.keys("count"))) == ["(1, 'a')", "1", "None"]


def test_no_cache_still_reads_its_writes_and_a_negative_size_is_refused(make_rocks):
    rocks = make_rocks(entries=0)
    state = counts(rocks)
    put(rocks, state, "a", 1)
    assert in_db(rocks, "a") == 1 and not state._values
    assert read(rocks, state, "a") == 1
    with pytest.raises(ConfigurationError, match="write_cache_entries"):
        EmbeddedRocksDBStateBackend(write_cache_entries=-1)


def test_the_limit_is_shared_by_the_value_states(make_rocks):
    rocks = make_rocks(entries=10)
    first = counts(rocks)
    second = rocks.get_value_state(ValueStateDescriptor("other"))
    assert first._cache.limit == second._cache.limit == 5


def test_ttl_expiry_through_the_cache(make_rocks):
    rocks = make_rocks(entries=2)
    clock = ManualClock(1_000)
    ttl = StateTtlConfig.new_builder(Time.milliseconds(100)).build()
    descriptor = ValueStateDescriptor("count")
    descriptor.enable_time_to_live(ttl)
    state = keyed_state_handle(rocks, descriptor, clock)
    for key in ("a", "b", "c"):  # "a" evicted into RocksDB, "b" and "c" cached
        put(rocks, state, key, key.upper())
    clock.now = 1_099
    assert [read(rocks, state, key) for key in "abc"] == ["A", "B", "C"]
    clock.now = 1_100
    assert [read(rocks, state, key) for key in "abc"] == [None, None, None]
    restored = make_rocks(entries=2)
    restored.restore([canonical_bytes(rocks)])
    again = keyed_state_handle(restored, descriptor, clock)
    assert [read(restored, again, key) for key in "abc"] == [None, None, None]
