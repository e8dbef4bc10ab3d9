"""`prefetch(keys)` of the RocksDB backend (one multi-get of a batch's keys into the value
states' write-back caches, `rocksdb_backend.py`), event by event against a real RocksDB in
tmp_path: a prefetched value is what a read without the prefetch would give, whatever
happened between the prefetch and the read (writes, deletions, large values written
through, the batched path, a snapshot's flush, evictions, TTL, a restore), and the keys of
a batch are read once and then hit the cache.

Each scenario runs on the RocksDB backend with a small cache (evictions happen) and on the
heap backend (whose prefetch does nothing): every read must be the expected value on both.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.clocks import ManualClock

from barrierflow.state import StateTtlConfig, Time, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.handles import keyed_state_handle
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group
from barrierflow.state.rocksdb_cache import LARGE_VALUE
from barrierflow.state.rocksdb_encoding import key_part, state_prefix

MAX_P = 128
ALL = KeyGroupRange(0, MAX_P - 1)
BIG = "x" * (LARGE_VALUE + 1)


# One scenario: steps in order. ("put", key, value), ("prefetch", keys), ("read", key,
# expected), ("put_many", keys, values), ("remove_many", keys), ("snapshot",) (the
# barrier's flush of the cached writes), ("mutate", key) (read a list and change the
# object read: nothing stored may change).
SCENARIOS: dict[str, list[tuple[Any, ...]]] = {
    "a prefetched key reads what RocksDB holds": [
        ("put", "a", 1),
        ("put", "b", 2),
        ("snapshot",),
        ("put", "c", 3),
        ("put", "d", 4),
        ("put", "e", 5),
        ("put", "f", 6),  # a, b evicted
        ("prefetch", ["a", "b", "zz"]),
        ("read", "a", 1),
        ("read", "b", 2),
        ("read", "zz", None),
    ],
    "a cached write is never overwritten by the older value in RocksDB": [
        ("put", "a", 1),
        ("snapshot",),  # RocksDB holds 1, the cache too
        ("put", "a", 2),  # cached, dirty: RocksDB still holds 1
        ("prefetch", ["a"]),
        ("read", "a", 2),
        ("put", "b", None),
        ("prefetch", ["b"]),
        ("read", "b", None),
    ],
    "a write between the prefetch and the read wins": [
        ("put", "a", 1),
        ("put", "b", 1),
        ("put", "c", 1),
        ("put", "d", 1),
        ("put", "e", 1),
        ("prefetch", ["a", "b"]),
        ("put", "a", 7),
        ("put", "b", None),
        ("read", "a", 7),
        ("read", "b", None),
    ],
    "a large value written through after a prefetch is read back": [
        ("put", "a", 1),
        ("snapshot",),
        ("prefetch", ["a"]),
        ("put", "a", BIG),
        ("read", "a", BIG),
        ("prefetch", ["a"]),
        ("read", "a", BIG),  # large: stays uncached
        ("put", "a", 3),
        ("prefetch", ["a"]),
        ("read", "a", 3),
    ],
    "the batched path's writes after a prefetch are read": [
        ("put", "a", 1),
        ("put", "b", 2),
        ("prefetch", ["a", "b", "c"]),
        ("put_many", ["a", "c"], [10, 30]),
        ("read", "a", 10),
        ("read", "b", 2),
        ("read", "c", 30),
        ("prefetch", ["a", "b", "c"]),
        ("remove_many", ["b", "c"]),
        ("read", "a", 10),
        ("read", "b", None),
        ("read", "c", None),
    ],
    "a batch longer than the cache: evicted prefetches are read again": [
        ("put", "k0", 0),
        ("put", "k1", 1),
        ("put", "k2", 2),
        ("put", "k3", 3),
        ("put", "k4", 4),
        ("put", "k5", 5),
        ("put", "k6", 6),
        ("put", "k7", 7),
        ("snapshot",),
        ("prefetch", [f"k{n}" for n in range(8)] + ["k1", "k0"]),
        ("put", "k0", 100),
        *[("read", f"k{n}", 100 if n == 0 else n) for n in range(8)],
    ],
    "keys equal as dict keys share one entry, other key types prefetch too": [
        ("put", 1, "one"),
        ("put", (1, "a"), "tuple"),
        ("put", None, "none"),
        ("put", 2.5, "float"),
        ("snapshot",),
        ("put", "p", 0),
        ("put", "q", 0),
        ("put", "r", 0),
        ("put", "s", 0),  # evicts them
        ("prefetch", [True, (1.0, "a"), None, 2.5, 1.0]),
        ("read", 1, "one"),
        ("read", True, "one"),
        ("read", (1, "a"), "tuple"),
        ("read", None, "none"),
        ("read", 2.5, "float"),
    ],
    "a mutable value prefetched is a fresh object at every read": [
        ("put", "a", [1, 2]),
        ("snapshot",),
        ("put", "b", 0),
        ("put", "c", 0),
        ("put", "d", 0),
        ("put", "e", 0),
        ("prefetch", ["a"]),
        ("mutate", "a"),
        ("read", "a", [1, 2]),
    ],
    "a key that cannot be encoded is skipped, the others prefetched": [
        ("put", "a", 1),
        ("snapshot",),
        ("prefetch", [["unhashable"], "a"]),
        ("read", "a", 1),
    ],
}


def run(backend: Any, state: Any, steps: list[tuple[Any, ...]]) -> None:
    for number, step in enumerate(steps):
        op = step[0]
        if op == "put":
            backend.set_current_key(step[1])
            state.update(step[2])
        elif op == "prefetch":
            backend.prefetch(step[1])
        elif op == "read":
            backend.set_current_key(step[1])
            assert state.value() == step[2], f"step {number}: {step}"
        elif op == "put_many":
            state.put_many(step[1], step[2])
        elif op == "remove_many":
            state.remove_many(step[1])
        elif op == "snapshot":
            backend.snapshot().release()
        elif op == "mutate":
            backend.set_current_key(step[1])
            state.value().append("changed")
        else:
            raise AssertionError(f"unknown step {step}")


ON_DISK_ONLY = {"a mutable value prefetched is a fresh object at every read"}
"""The heap backend hands out the stored object itself (its documented difference)."""


@pytest.mark.parametrize(
    ("name", "backend_kind"),
    [
        (name, kind)
        for name in SCENARIOS
        for kind in ("rocksdb", "heap")
        if kind == "rocksdb" or name not in ON_DISK_ONLY
    ],
)
def test_a_prefetch_never_changes_what_is_read(make_rocks, name, backend_kind):
    if backend_kind == "rocksdb":
        backend = make_rocks(entries=4)
    else:
        backend = HeapKeyedStateBackend(ALL, MAX_P)
    state = backend.get_value_state(ValueStateDescriptor("count"))
    assert backend.prefetches is (backend_kind == "rocksdb")
    run(backend, state, SCENARIOS[name])


def test_the_prefetched_keys_are_read_once_and_then_hit_the_cache(make_rocks):
    rocks = make_rocks(entries=100)
    state = rocks.get_value_state(ValueStateDescriptor("count"))
    other = rocks.get_value_state(ValueStateDescriptor("other"))
    for key in ("a", "b"):
        rocks.set_current_key(key)
        state.update(key.upper())
        other.update(key)
    rocks.snapshot().release()
    for each in (state, other):
        each._cache.drop()
    rocks.prefetch(["a", "b", "a", "c"])
    assert state._values == {"a": "A", "b": "B", "c": None}
    assert other._values == {"a": "a", "b": "b", "c": None}
    for key in ("a", "b"):  # gone from RocksDB: the reads below come from the cache
        rocks._db.delete(state_prefix(assign_to_key_group(key, MAX_P), 0) + key_part(key))
    rocks.set_current_key("a")
    assert state.value() == "A"
    rocks.set_current_key("b")
    assert state.value() == "B"


def test_keys_outside_the_key_groups_are_left_to_set_current_key(make_rocks):
    mine = KeyGroupRange(0, 63)
    rocks = make_rocks(key_groups=mine)
    state = rocks.get_value_state(ValueStateDescriptor("count"))
    inside = next(f"k{n}" for n in range(100) if assign_to_key_group(f"k{n}", MAX_P) <= 63)
    outside = next(f"k{n}" for n in range(100) if assign_to_key_group(f"k{n}", MAX_P) > 63)
    rocks.prefetch([inside, outside])
    assert list(state._values) == [inside]


def test_no_cache_no_prefetch(make_rocks):
    rocks = make_rocks(entries=0)
    assert not rocks.prefetches  # no state yet
    state = rocks.get_value_state(ValueStateDescriptor("count"))
    assert not rocks.prefetches
    rocks.prefetch(["a"])
    assert not state._values


def test_an_expired_value_prefetched_is_not_returned_nor_restored(make_rocks):
    rocks = make_rocks(entries=2)
    clock = ManualClock(1_000)
    ttl = StateTtlConfig.new_builder(Time.milliseconds(100)).build()
    descriptor = ValueStateDescriptor("count")
    descriptor.enable_time_to_live(ttl)
    state = keyed_state_handle(rocks, descriptor, clock)
    for key in ("a", "b", "c"):  # "a" evicted into RocksDB
        rocks.set_current_key(key)
        state.update(key.upper())
    rocks.snapshot().release()
    clock.now = 1_099
    rocks.prefetch(["a", "b", "c"])
    rocks.set_current_key("a")
    assert state.value() == "A"
    clock.now = 1_100
    rocks.prefetch(["a", "b", "c"])
    for key in "abc":
        rocks.set_current_key(key)
        assert state.value() is None
    restored = make_rocks(entries=2)
    restored.restore([canonical_bytes(rocks)])
    again = keyed_state_handle(restored, descriptor, clock)
    restored.prefetch(["a", "b", "c"])
    for key in "abc":
        restored.set_current_key(key)
        assert again.value() is None


def test_a_restore_after_a_prefetch_replaces_what_was_prefetched(make_rocks):
    source = make_rocks()
    source_state = source.get_value_state(ValueStateDescriptor("count"))
    source.set_current_key("a")
    source_state.update(41)
    section = canonical_bytes(source)
    rocks = make_rocks()
    state = rocks.get_value_state(ValueStateDescriptor("count"))
    rocks.prefetch(["a"])  # cached as absent
    rocks.restore([section])
    rocks.set_current_key("a")
    assert state.value() == 41
    rocks.set_current_key("a")
    state.update(42)
    rocks.prefetch(["a"])
    again = make_rocks()
    again.restore([canonical_bytes(rocks)])
    again_state = again.get_value_state(ValueStateDescriptor("count"))
    again.prefetch(["a"])
    again.set_current_key("a")
    assert again_state.value() == 42


def test_a_large_value_is_not_prefetched_into_the_cache(make_rocks):
    rocks = make_rocks()
    state = rocks.get_value_state(ValueStateDescriptor("count"))
    rocks.set_current_key("a")
    state.update(BIG)  # written through
    rocks.prefetch(["a"])
    assert "a" not in state._values
    assert state.value() == BIG
