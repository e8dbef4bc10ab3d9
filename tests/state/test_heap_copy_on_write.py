"""The heap backend's asynchronous snapshot: copy-on-write per key group.

A snapshot taken at the barrier is written later, on the uploader thread, while records
keep changing the state: whatever happens after `snapshot()` returned, `write` gives the
state as it was then. Checked event by event and against a deep-copied dict model.
"""

from __future__ import annotations

import copy
import pickle
import threading
from collections import namedtuple
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow import _fs
from barrierflow.errors import ConfigurationError
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group

MAX_P = 128
SIDE_FILES = _fs.Location("/no/side/files")  # a checkpoint's folder: the heap writes none there
COUNT = ValueStateDescriptor("count")
SEEN = ListStateDescriptor("seen")
ITEMS = MapStateDescriptor("items")


def new_backend() -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P)


def contents(data: bytes) -> dict[str, dict[Any, Any]]:
    """What a written snapshot holds, per state: {key: value} (lists and dicts as such)."""
    restored = new_backend()
    restored.restore([data])
    states = {
        "count": restored.get_value_state(COUNT),
        "seen": restored.get_list_state(SEEN),
        "items": restored.get_map_state(ITEMS),
    }
    found: dict[str, dict[Any, Any]] = {}
    for name, state in states.items():
        found[name] = {}
        for key in restored.keys(name):
            restored.set_current_key(key)
            if name == "count":
                found[name][key] = state.value()  # type: ignore[attr-defined]
            elif name == "seen":
                found[name][key] = state.get()  # type: ignore[attr-defined]
            else:
                found[name][key] = dict(state.items())  # type: ignore[attr-defined]
    return found


def filled() -> tuple[HeapKeyedStateBackend, Any, Any, Any]:
    backend = new_backend()
    count, seen, items = (
        backend.get_value_state(COUNT),
        backend.get_list_state(SEEN),
        backend.get_map_state(ITEMS),
    )
    for key in ["a", "b"]:
        backend.set_current_key(key)
        count.update({"total": 1})
        seen.add(1)
        items.put("x", [1])
    return backend, count, seen, items


AT_BARRIER = {
    "count": {"a": {"total": 1}, "b": {"total": 1}},
    "seen": {"a": [1], "b": [1]},
    "items": {"a": {"x": [1]}, "b": {"x": [1]}},
}


def test_the_written_snapshot_is_the_state_at_the_barrier_whatever_changes_afterwards():
    backend, count, seen, items = filled()
    snapshot = backend.snapshot()
    backend.set_current_key("a")
    count.value()["total"] = 99  # in place, without update()
    seen.add(2)  # appends to the stored list in place
    items.put("y", 2)  # puts into the stored dict in place
    items.get("x").append(5)  # a map value changed in place
    backend.set_current_key("b")
    count.clear()
    seen.update([7])
    items.remove("x")
    backend.set_current_key("new key")
    count.update({"total": 3})
    untouched = next(
        k
        for k in range(10_000)
        if assign_to_key_group(k, MAX_P)
        not in {assign_to_key_group(key, MAX_P) for key in ["a", "b", "new key"]}
    )
    backend.set_current_key(untouched)  # a key group first touched after the snapshot
    seen.add(1)

    assert contents(snapshot.write(None)) == AT_BARRIER
    # and the live state has every change: what was read and changed in place included
    live = contents(pickle.loads(pickle.dumps(backend.snapshot().write(None))))
    assert live["count"] == {"a": {"total": 99}, "new key": {"total": 3}}
    assert live["seen"] == {"a": [1, 2], "b": [7], untouched: [1]}
    assert live["items"] == {"a": {"x": [1, 5], "y": 2}}


def test_a_value_read_after_the_barrier_is_a_copy_of_its_own_that_stays_in_the_state():
    backend, count, _, _ = filled()
    backend.set_current_key("a")
    before = count.value()
    assert count.value() is before  # no snapshot in flight: the stored object itself
    snapshot = backend.snapshot()
    after = count.value()
    assert after == before and after is not before  # the snapshot keeps `before`
    assert count.value() is after  # copied once: mutations in place stay visible
    after["total"] = 2
    assert count.value() == {"total": 2}
    snapshot.release()


def test_numbers_strings_windows_and_tuples_of_them_are_handed_out_uncopied():
    from barrierflow.window import GlobalWindow, TimeWindow

    backend = new_backend()
    count = backend.get_value_state(COUNT)
    window = TimeWindow(0, 10)
    values = [7, "word", (1, "a", 2.5), b"raw", window, (window, GlobalWindow.get())]
    for key, value in enumerate(values):
        backend.set_current_key(key)
        count.update(value)
    snapshot = backend.snapshot()
    for key, value in enumerate(values):
        backend.set_current_key(key)
        assert count.value() is value
    snapshot.release()


Pair = namedtuple("Pair", "left right")


class Loose(tuple):
    """A tuple subclass whose instances have a dict: they can change in place."""


def test_named_tuples_of_immutable_values_are_handed_out_uncopied_others_copied():
    backend = new_backend()
    count = backend.get_value_state(COUNT)
    frozen, nested, holding = Pair(1, ("a", 2.5)), (Pair(1, 2), "x"), Pair(1, [2])
    loose = Loose((1, 2))
    loose.note = "before"
    for key, value in enumerate([frozen, nested, holding, loose]):
        backend.set_current_key(key)
        count.update(value)
    snapshot = backend.snapshot()
    for key, value in enumerate([frozen, nested]):
        backend.set_current_key(key)
        assert count.value() is value
        assert count.value() is value  # the second read: known immutable, no check
    backend.set_current_key(2)
    copied = count.value()
    assert copied == holding and copied is not holding and type(copied) is Pair
    copied.right.append(3)  # changes the state, not the snapshot's version
    backend.set_current_key(3)
    copied_loose = count.value()
    assert copied_loose is not loose and copied_loose.note == "before"
    copied_loose.note = "after"
    written = contents(snapshot.write(None))["count"]
    assert written[2] == Pair(1, [2]) and written[3].note == "before"
    snapshot.release()
    backend.set_current_key(2)
    assert count.value() == Pair(1, [2, 3])


def test_the_barrier_frees_no_per_key_bookkeeping_the_released_snapshot_does():
    """At the barrier, nothing grows with the keys read or written since the last one:
    reads of immutable values are not remembered, and the keys written under the last
    snapshot are set aside for the new snapshot to free when it is released."""
    backend = new_backend()
    count = backend.get_value_state(COUNT)
    for key in range(200):
        backend.set_current_key(key)
        count.update((key, "x"))
    first = backend.snapshot()
    group = assign_to_key_group(0, MAX_P)
    shared = backend._tables["count"].reads[group]
    for key in range(200):
        backend.set_current_key(key)
        count.value()
    assert shared._owned == set()  # immutable reads: nothing remembered
    backend.set_current_key(0)
    count.update((0, "y"))
    written = shared._owned
    assert 0 in written
    second = backend.snapshot()
    assert shared._owned == set() and any(kept is written for kept in second._garbage)
    first.release()
    second.release()
    assert second._garbage == []


def test_a_dict_value_is_copied_by_marshal_and_an_object_by_pickle_both_equal():
    backend = new_backend()
    count = backend.get_value_state(COUNT)
    plain, counted = {"n": [1]}, Counted()
    for key, value in enumerate([plain, counted]):
        backend.set_current_key(key)
        count.update(value)
    PICKLED.clear()
    snapshot = backend.snapshot()
    backend.set_current_key(0)
    assert count.value() == plain and count.value() is not plain
    assert PICKLED == []  # marshal's round trip: no pickle
    backend.set_current_key(1)
    assert type(count.value()) is Counted and count.value() is not counted
    assert [counted] == PICKLED
    snapshot.release()


def test_maps_of_numbers_are_copied_shallow_and_a_restored_map_of_lists_deep():
    """A map state's maps are copied with `dict.copy()` while every value put was a number;
    restored values count as put (a list among them makes the copies deep again)."""
    backend = new_backend()
    items = backend.get_map_state(ITEMS)
    backend.set_current_key("a")
    items.put("x", 1)
    table = backend._tables["items"]
    numbers = backend.snapshot()
    items.put("y", 2)  # the map copied first, shallow
    assert table.flat_maps
    assert contents(numbers.write(SIDE_FILES))["items"] == {"a": {"x": 1}}
    only_numbers = numbers.write(None)
    numbers.release()
    items.put("z", [3])
    assert not table.flat_maps, "a list among the values"
    restored = new_backend()
    restored.restore([only_numbers])
    assert restored._tables["items"].flat_maps
    restored = new_backend()
    restored.restore([backend.snapshot().write(None)])
    assert not restored._tables["items"].flat_maps, "restored values count as put"
    held = restored.snapshot()
    restored.set_current_key("a")
    restored.get_map_state(ITEMS).get("z").append(4)  # a copy of its own, not the held list
    assert contents(held.write(SIDE_FILES))["items"] == {"a": {"x": 1, "y": 2, "z": [3]}}


def test_two_overlapping_snapshots_each_keep_their_own_version_in_any_write_order():
    backend, count, seen, _ = filled()
    first = backend.snapshot()
    backend.set_current_key("a")
    count.update({"total": 2})
    seen.add(2)
    second = backend.snapshot()
    seen.add(3)
    count.value()["total"] = 3
    backend.set_current_key("c")
    count.update({"total": 1})

    second_data = second.write(None)  # the later one first
    first_data = first.write(None)
    assert contents(first_data) == AT_BARRIER
    at_second = contents(second_data)
    assert at_second["count"] == {"a": {"total": 2}, "b": {"total": 1}}
    assert at_second["seen"] == {"a": [1, 2], "b": [1]}
    first.release()
    backend.set_current_key("a")
    seen.add(4)  # the second still holds its version
    assert contents(second.write(None))["seen"] == {"a": [1, 2], "b": [1]}
    second.release()


PICKLED: list[Any] = []


class Counted:
    """A value that records each time it is pickled (or copied through pickle)."""

    def __reduce__(self) -> Any:
        PICKLED.append(self)
        return (Counted, ())


def test_snapshot_touches_no_value_and_copies_no_dict():
    pickled = PICKLED
    pickled.clear()
    backend = new_backend()
    count = backend.get_value_state(COUNT)
    for key in range(2_000):
        backend.set_current_key(key)
        count.update(Counted())
    table = backend._tables["count"]
    dicts = list(table.live)
    snapshot = backend.snapshot()
    assert pickled == []  # no value serialized or copied at the barrier
    assert all(a is b for a, b in zip(table.live, dicts, strict=True))  # no dict copied

    backend.set_current_key(0)
    count.update(Counted())  # the first write copies that one key group's dict only
    group = assign_to_key_group(0, MAX_P)
    copied = [i for i, (a, b) in enumerate(zip(table.live, dicts, strict=True)) if a is not b]
    assert copied == [group]
    assert table.live[group] == {**dicts[group], 0: table.live[group][0]}
    snapshot.write(None)
    assert len(pickled) == 2_000  # the write serializes the snapshot's own values
    snapshot.release()


def test_a_released_snapshot_frees_its_version_and_later_writes_copy_nothing():
    backend, count, _, _ = filled()
    table = backend._tables["count"]
    snapshot = backend.snapshot()
    snapshot.release()
    with pytest.raises(RuntimeError, match="released"):
        snapshot.write(None)
    dicts = list(table.live)
    backend.set_current_key("a")
    value = count.value()
    count.update({"total": 5})
    assert all(a is b for a, b in zip(table.live, dicts, strict=True))  # one copy of state
    assert count.value() is not value and count.value() == {"total": 5}
    group = assign_to_key_group("a", MAX_P)
    assert table.reads[group] is table.writes[group] is table.live[group]  # plain dict again


def test_a_value_that_cannot_be_pickled_is_handed_out_as_is_and_fails_the_write():
    backend = new_backend()
    count = backend.get_value_state(COUNT)
    backend.set_current_key("a")
    lock = threading.Lock()
    count.update(lock)
    snapshot = backend.snapshot()
    assert count.value() is lock  # no copy possible; the write reports it
    with pytest.raises(ConfigurationError, match="value of state 'count' for key 'a'"):
        snapshot.write(None)
    snapshot.release()


def test_a_snapshot_filter_writes_transformed_values_and_leaves_the_state_alone():
    backend, count, _, _ = filled()
    backend.set_snapshot_filter("count", lambda v: None if v["total"] < 2 else v["total"])
    backend.set_current_key("b")
    count.update({"total": 4})
    snapshot = backend.snapshot()
    assert contents(snapshot.write(None))["count"] == {"b": 4}
    backend.set_current_key("a")
    assert count.value() == {"total": 1}
    backend.set_snapshot_filter("count", None)
    assert contents(backend.snapshot().write(None))["count"] == {
        "a": {"total": 1},
        "b": {"total": 4},
    }


# ---- property: random changes interleaved with snapshots, writes and releases ----------------

KEYS = st.sampled_from(["a", "b", ("t", 1)])
OPS = st.one_of(
    st.tuples(st.just("update"), KEYS, st.integers(0, 5)),
    st.tuples(st.just("update_list_value"), KEYS, st.integers(0, 5)),
    st.tuples(st.just("mutate_value"), KEYS, st.integers(0, 5)),
    st.tuples(st.just("add"), KEYS, st.integers(0, 5)),
    st.tuples(st.just("put"), KEYS, st.integers(0, 2), st.integers(0, 5)),
    st.tuples(st.just("put_number"), KEYS, st.integers(0, 2), st.integers(0, 5)),
    st.tuples(st.just("mutate_map_value"), KEYS, st.integers(0, 2), st.integers(0, 5)),
    st.tuples(st.just("remove"), KEYS, st.integers(0, 2)),
    st.tuples(st.just("clear"), KEYS, st.sampled_from(["count", "seen", "items"])),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("write"), st.integers(0, 3)),
    st.tuples(st.just("release"), st.integers(0, 3)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(OPS, max_size=60))
def test_every_written_snapshot_equals_a_deep_copy_of_the_state_at_its_barrier(ops):
    backend = new_backend()
    count, seen, items = (
        backend.get_value_state(COUNT),
        backend.get_list_state(SEEN),
        backend.get_map_state(ITEMS),
    )
    model: dict[str, dict[Any, Any]] = {"count": {}, "seen": {}, "items": {}}
    pending: list[tuple[Any, dict[str, dict[Any, Any]]]] = []
    for op in ops:
        kind = op[0]
        if kind in ("snapshot", "write", "release"):
            if kind == "snapshot":
                pending.append((backend.snapshot(), copy.deepcopy(model)))
            elif pending:
                snapshot, expected = pending[op[1] % len(pending)]
                if kind == "write":  # a savepoint's (pickled) or a checkpoint's (marshalled)
                    side_files = None if op[1] % 2 else SIDE_FILES
                    assert contents(snapshot.write(side_files)) == expected
                else:
                    snapshot.release()
                    pending.remove((snapshot, expected))
            continue
        key = op[1]
        backend.set_current_key(key)
        if kind == "update":
            count.update(op[2])
            model["count"][key] = op[2]
        elif kind == "update_list_value":
            count.update([op[2]])
            model["count"][key] = [op[2]]
        elif kind == "mutate_value":  # in place, without update(): the state changes too
            value = count.value()
            if isinstance(value, list):
                value.append(op[2])
                model["count"][key].append(op[2])
        elif kind == "add":
            seen.add(op[2])
            model["seen"].setdefault(key, []).append(op[2])
        elif kind == "put":
            items.put(op[2], [op[3]])
            model["items"].setdefault(key, {})[op[2]] = [op[3]]
        elif kind == "put_number":  # while only numbers were put, a map's copy is shallow
            items.put(op[2], op[3])
            model["items"].setdefault(key, {})[op[2]] = op[3]
        elif kind == "mutate_map_value":
            value = items.get(op[2])
            if isinstance(value, list):
                value.append(op[3])
                model["items"][key][op[2]].append(op[3])
        elif kind == "remove":
            items.remove(op[2])
            entries = model["items"].get(key, {})
            entries.pop(op[2], None)
            if not entries:
                model["items"].pop(key, None)
        else:
            {"count": count, "seen": seen, "items": items}[op[2]].clear()
            model[op[2]].pop(key, None)
    for snapshot, expected in pending:
        assert contents(snapshot.write(None)) == expected
        snapshot.release()
    assert contents(backend.snapshot().write(None)) == model
