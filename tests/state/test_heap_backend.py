"""The heap keyed state backend: state scoped per key, snapshots, restore and rescaling."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow import _envelope as state_format
from barrierflow.errors import ConfigurationError, StateRestoreError, StreamCorruptionError
from barrierflow.state import (
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ValueState,
    ValueStateDescriptor,
)
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import KEYED_STATE, HeapKeyedStateBackend
from barrierflow.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from barrierflow.state.operator_state import encode_operator_state

MAX_P = 128
COUNT = ValueStateDescriptor("count")
SEEN = ListStateDescriptor("seen")
ITEMS = MapStateDescriptor("items")


def full_backend() -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P)


def subtask_backends(parallelism: int) -> list[HeapKeyedStateBackend]:
    return [
        HeapKeyedStateBackend(key_group_range_for_subtask(MAX_P, parallelism, i), MAX_P)
        for i in range(parallelism)
    ]


def owner(key, parallelism: int) -> int:
    return subtask_for_key_group(MAX_P, parallelism, assign_to_key_group(key, MAX_P))


def values_of(backend: HeapKeyedStateBackend, descriptor=COUNT) -> dict:
    state = backend.get_value_state(descriptor)
    found = {}
    for key in backend.keys(descriptor.name):
        backend.set_current_key(key)
        found[key] = state.value()
    return found


# ---- value state ----------------------------------------------------------------------------


def test_value_state_is_scoped_to_the_current_key():
    backend = full_backend()
    count = backend.get_value_state(COUNT)
    backend.set_current_key("a")
    count.update(1)
    backend.set_current_key("b")
    assert count.value() is None
    count.update(10)
    backend.set_current_key("a")
    assert count.value() == 1
    assert backend.current_key == "a"
    assert backend.current_key_group == assign_to_key_group("a", MAX_P)


def test_value_state_update_none_and_clear_remove_the_value():
    backend = full_backend()
    count = backend.get_value_state(COUNT)
    backend.set_current_key("a")
    count.update(1)
    count.update(None)
    assert list(backend.keys("count")) == []
    count.update(2)
    count.clear()
    assert count.value() is None
    assert list(backend.keys("count")) == []


def test_states_are_instances_of_the_public_interfaces():
    backend = full_backend()
    assert isinstance(backend.get_value_state(COUNT), ValueState)
    assert isinstance(backend.get_list_state(SEEN), ListState)
    assert isinstance(backend.get_map_state(ITEMS), MapState)


def test_asking_twice_for_a_state_returns_the_same_object():
    backend = full_backend()
    assert backend.get_value_state(COUNT) is backend.get_value_state(ValueStateDescriptor("count"))
    assert backend.get_list_state(SEEN) is backend.get_list_state(SEEN)
    assert backend.get_map_state(ITEMS) is backend.get_map_state(ITEMS)


def test_one_name_for_two_kinds_of_state_is_a_configuration_error():
    backend = full_backend()
    backend.get_value_state(ValueStateDescriptor("x"))
    with pytest.raises(
        ConfigurationError, match="state 'x' is value state; it cannot also be list"
    ):
        backend.get_list_state(ListStateDescriptor("x"))


def test_a_descriptor_of_the_wrong_kind_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="expected a ValueStateDescriptor"):
        full_backend().get_value_state(ListStateDescriptor("x"))


def test_a_state_needs_a_non_empty_name():
    with pytest.raises(ConfigurationError, match="non-empty str"):
        ValueStateDescriptor("")


def test_state_used_before_any_key_is_set_is_a_configuration_error():
    backend = full_backend()
    count = backend.get_value_state(COUNT)
    with pytest.raises(ConfigurationError, match="before set_current_key"):
        count.value()
    with pytest.raises(ConfigurationError, match="before set_current_key"):
        backend.get_list_state(SEEN).add(1)


def test_an_unhashable_key_is_a_configuration_error_suggesting_a_tuple():
    backend = full_backend()
    count = backend.get_value_state(COUNT)
    backend.set_current_key(["a", 1])
    with pytest.raises(ConfigurationError, match=r"hashable key.*tuple"):
        count.update(1)


# ---- routing --------------------------------------------------------------------------------


def test_a_key_of_another_subtask_is_stream_corruption_naming_key_and_group():
    first, second = subtask_backends(2)
    key = next(k for k in (f"k{i}" for i in range(1000)) if owner(k, 2) == 1)
    group = assign_to_key_group(key, MAX_P)
    second.set_current_key(key)
    with pytest.raises(StreamCorruptionError, match=f"key '{key}' is in key group {group}.*0, 63"):
        first.set_current_key(key)


@given(st.lists(st.text(max_size=6) | st.integers(), max_size=50), st.integers(1, 8))
def test_each_key_is_accepted_by_exactly_the_subtask_it_is_routed_to(keys, parallelism):
    backends = subtask_backends(parallelism)
    for key in keys:
        accepted = []
        for index, backend in enumerate(backends):
            try:
                backend.set_current_key(key)
                accepted.append(index)
            except StreamCorruptionError:
                pass
        assert accepted == [owner(key, parallelism)]


def test_a_key_group_range_beyond_max_parallelism_is_refused():
    with pytest.raises(ConfigurationError, match="does not fit max parallelism 128"):
        HeapKeyedStateBackend(KeyGroupRange(0, 128), MAX_P)


# ---- list and map state ---------------------------------------------------------------------


def test_list_state_follows_flinks_list_semantics():
    backend = full_backend()
    seen = backend.get_list_state(SEEN)
    backend.set_current_key("a")
    assert seen.get() == []
    seen.add(1)
    seen.add_all([2, 3])
    seen.add_all(None)
    seen.add_all([])
    assert seen.get() == [1, 2, 3]
    seen.update([9])
    assert seen.get() == [9]
    seen.update([])
    assert seen.get() == []
    assert list(backend.keys("seen")) == []


def test_list_state_get_returns_a_copy():
    backend = full_backend()
    seen = backend.get_list_state(SEEN)
    backend.set_current_key("a")
    seen.add(1)
    seen.get().append(2)
    assert seen.get() == [1]


def test_list_state_refuses_none_as_flink_does():
    backend = full_backend()
    seen = backend.get_list_state(SEEN)
    backend.set_current_key("a")
    with pytest.raises(ValueError, match="None"):
        seen.add(None)
    with pytest.raises(ValueError, match="None"):
        seen.add_all([1, None])
    assert seen.get() == []


def test_map_state_follows_pyflinks_map_semantics():
    backend = full_backend()
    items = backend.get_map_state(ITEMS)
    backend.set_current_key("a")
    assert items.is_empty()
    assert items.get("x") is None
    items.put("x", 1)
    items.put_all({"y": 2, "z": 3})
    items["w"] = 4
    assert items.contains("x") and "y" in items and not items.contains("q")
    assert items.keys() == ["x", "y", "z", "w"]
    assert items.values() == [1, 2, 3, 4]
    assert items.items() == [("x", 1), ("y", 2), ("z", 3), ("w", 4)]
    assert list(items) == ["x", "y", "z", "w"]
    items.remove("x")
    del items["w"]
    items.remove("not there")
    assert items["y"] == 2
    backend.set_current_key("b")
    assert items.is_empty()
    backend.set_current_key("a")
    items.clear()
    assert items.is_empty()
    assert list(backend.keys("items")) == []


def test_removing_the_last_map_entry_leaves_no_key_behind():
    backend = full_backend()
    items = backend.get_map_state(ITEMS)
    backend.set_current_key("a")
    items.put("x", 1)
    items.remove("x")
    assert list(backend.keys("items")) == []


def test_keys_lists_every_key_with_state_and_tolerates_changes_while_iterating():
    backend = full_backend()
    count = backend.get_value_state(COUNT)
    for key in range(20):
        backend.set_current_key(key)
        count.update(key)
    for key in backend.keys("count"):
        backend.set_current_key(key)
        count.clear()
    assert list(backend.keys("count")) == []
    assert list(backend.keys("unknown")) == []


# ---- snapshots ------------------------------------------------------------------------------


def test_a_snapshot_does_not_change_when_state_changes_afterwards():
    backend = full_backend()
    count, seen = backend.get_value_state(COUNT), backend.get_list_state(SEEN)
    backend.set_current_key("a")
    count.update({"total": 1})
    seen.add(1)
    snapshot = backend.snapshot()
    count.value()["total"] = 99  # mutated in place, as heap state allows
    seen.add(2)
    backend.set_current_key("b")
    count.update({"total": 5})
    restored = full_backend()
    restored.restore([snapshot.write(None)])
    restored.set_current_key("a")
    assert restored.get_value_state(COUNT).value() == {"total": 1}
    assert restored.get_list_state(SEEN).get() == [1]
    assert list(restored.keys("count")) == ["a"]


def test_the_snapshot_header_lists_states_and_only_non_empty_key_groups():
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 63), MAX_P)
    backend.get_value_state(COUNT)
    backend.get_map_state(ITEMS)
    key = next(k for k in range(1000) if owner(k, 2) == 0)
    backend.set_current_key(key)
    backend.get_value_state(COUNT).update(1)
    header, body = state_format.decode(canonical_bytes(backend), KEYED_STATE)
    group = assign_to_key_group(key, MAX_P)
    assert header["version"] == 1
    assert header["max_parallelism"] == MAX_P
    assert header["key_group_range"] == [0, 63]
    assert header["states"] == [["count", "value"], ["items", "map"]]
    assert list(header["key_groups"]) == [group]
    assert header["key_groups"][group] == [0, len(body)]


def test_state_that_cannot_be_pickled_fails_the_snapshot_naming_state_and_key():
    backend = full_backend()
    backend.set_current_key("a")
    backend.get_value_state(COUNT).update(threading.Lock())
    with pytest.raises(ConfigurationError, match="value of state 'count' for key 'a'"):
        canonical_bytes(backend)


def test_restored_state_is_found_by_states_registered_after_restore():
    backend = full_backend()
    backend.set_current_key("a")
    backend.get_value_state(COUNT).update(3)
    backend.get_list_state(SEEN).add_all([1, 2])
    backend.get_map_state(ITEMS).put("x", "y")
    restored = full_backend()
    restored.restore([canonical_bytes(backend)])
    restored.set_current_key("a")
    assert restored.get_value_state(COUNT).value() == 3
    assert restored.get_list_state(SEEN).get() == [1, 2]
    assert restored.get_map_state(ITEMS).items() == [("x", "y")]


state_keys = st.text(max_size=8) | st.integers() | st.tuples(st.text(max_size=3), st.integers())
state_values = st.integers() | st.text() | st.lists(st.integers(), max_size=3)


@given(st.dictionaries(state_keys, state_values, max_size=60))
def test_restore_gives_back_exactly_what_was_snapshotted(contents):
    backend = full_backend()
    count = backend.get_value_state(COUNT)
    for key, value in contents.items():
        backend.set_current_key(key)
        count.update(value)
    restored = full_backend()
    restored.restore([canonical_bytes(backend)])
    assert values_of(restored) == contents


def fill(parallelism: int, contents: dict) -> list[bytes]:
    """Snapshots of `parallelism` subtasks holding `contents`, each key at its owner."""
    backends = subtask_backends(parallelism)
    for key, value in contents.items():
        backend = backends[owner(key, parallelism)]
        backend.set_current_key(key)
        backend.get_value_state(COUNT).update(value)
        backend.set_current_key(key)
        backend.get_list_state(SEEN).add(value)
    return [canonical_bytes(b) for b in backends]


@settings(max_examples=50)
@given(
    st.dictionaries(state_keys, st.integers(), max_size=80),
    st.sampled_from([(2, 3), (3, 2), (1, 4), (4, 1), (5, 7)]),
)
def test_rescaling_gives_every_key_to_exactly_its_new_owner(contents, scaling):
    old_parallelism, new_parallelism = scaling
    snapshots = fill(old_parallelism, contents)
    found: dict = {}
    for index, backend in enumerate(subtask_backends(new_parallelism)):
        backend.restore(snapshots)
        mine = values_of(backend)
        assert all(owner(key, new_parallelism) == index for key in mine)
        assert not set(mine) & set(found), "a key was restored twice"
        found.update(mine)
        for key, value in mine.items():
            backend.set_current_key(key)
            assert backend.get_list_state(SEEN).get() == [value]
    assert found == contents


def test_rescaling_from_2_to_3_subtasks_redistributes_a_word_count():
    words = {f"word-{i}": i for i in range(300)}
    snapshots = fill(2, words)
    restored = [values_of(backend_with(snapshots, b)) for b in subtask_backends(3)]
    assert sum(len(r) for r in restored) == 300
    assert {k: v for r in restored for k, v in r.items()} == words
    assert all(len(r) > 50 for r in restored)


def backend_with(snapshots: list[bytes], backend: HeapKeyedStateBackend) -> HeapKeyedStateBackend:
    backend.restore(snapshots)
    return backend


class Bomb:
    """Unpickling it fails: proves which key groups a restore unpickles."""

    def __reduce__(self):
        return (explode, ())


def explode():
    raise RuntimeError("this key group should not have been unpickled")


def test_restore_unpickles_only_key_groups_in_its_own_range():
    bomb_key = next(k for k in range(1000) if owner(k, 2) == 1)
    source = full_backend()
    source.set_current_key(bomb_key)
    source.get_value_state(COUNT).update(Bomb())
    safe_key = next(k for k in range(1000) if owner(k, 2) == 0)
    source.set_current_key(safe_key)
    source.get_value_state(COUNT).update("safe")
    snapshot = canonical_bytes(source)
    first, second = subtask_backends(2)
    first.restore([snapshot])
    assert values_of(first) == {safe_key: "safe"}
    group = assign_to_key_group(bomb_key, MAX_P)
    with pytest.raises(StateRestoreError, match=f"key group {group} .*cannot be unpickled"):
        second.restore([snapshot])


# ---- restore errors -------------------------------------------------------------------------


def snapshot_with_one_key(max_parallelism: int = MAX_P) -> bytes:
    backend = HeapKeyedStateBackend(KeyGroupRange(0, max_parallelism - 1), max_parallelism)
    backend.set_current_key("a")
    backend.get_value_state(COUNT).update(1)
    return canonical_bytes(backend)


def test_a_snapshot_with_another_max_parallelism_is_refused():
    with pytest.raises(StateRestoreError, match="max parallelism 256, this operator has 128"):
        full_backend().restore([snapshot_with_one_key(256)])


def test_a_key_group_in_two_snapshots_is_refused():
    snapshot = snapshot_with_one_key()
    group = assign_to_key_group("a", MAX_P)
    with pytest.raises(StateRestoreError, match=f"key group {group} appears in two"):
        full_backend().restore([snapshot, snapshot])


def test_a_restored_state_of_another_kind_is_refused():
    backend = full_backend()
    backend.get_list_state(ListStateDescriptor("count"))
    with pytest.raises(
        StateRestoreError, match="'count' as value state, this job declares it as list"
    ):
        backend.restore([snapshot_with_one_key()])


def test_operator_state_is_not_taken_for_keyed_state():
    with pytest.raises(StateRestoreError, match="expected a 'keyed-state' file"):
        full_backend().restore([encode_operator_state({"a": 1})])


def test_a_truncated_snapshot_is_refused():
    with pytest.raises(StateRestoreError, match="truncated"):
        full_backend().restore([snapshot_with_one_key()[:-3]])


def test_a_newer_keyed_state_version_is_refused():
    data = state_format.encode(
        KEYED_STATE,
        {"version": 2, "max_parallelism": MAX_P, "states": [], "key_groups": {}},
    )
    with pytest.raises(
        StateRestoreError, match="version 2; this barrierflow reads versions 1 to 1"
    ):
        full_backend().restore([data])


def test_a_section_outside_the_body_is_refused():
    data = state_format.encode(
        KEYED_STATE,
        {
            "version": 1,
            "max_parallelism": MAX_P,
            "states": [["count", "value"]],
            "key_groups": {5: [0, 100]},
        },
        b"short",
    )
    with pytest.raises(StateRestoreError, match=r"key group 5 lies at \[0, 100\) outside"):
        full_backend().restore([data])


def test_a_state_declared_after_restore_as_another_kind_is_refused():
    backend = full_backend()
    backend.restore([snapshot_with_one_key()])
    with pytest.raises(
        StateRestoreError, match="'count' as value state, this job declares it as map"
    ):
        backend.get_map_state(MapStateDescriptor("count"))


def test_the_young_gc_threshold_is_raised_while_a_snapshot_is_held() -> None:
    """Event by event: the first snapshot raises it, the last release (or a snapshot dropped
    unreleased) puts the saved threshold back; a higher one is never lowered."""
    import gc

    from barrierflow.state.heap_backend import GC_WHILE_HELD, YOUNG_THRESHOLD

    gc.collect()  # snapshots other tests dropped unreleased: their finalizers end their holds
    assert GC_WHILE_HELD._held == 0
    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        b = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
        first = b.snapshot(1)
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        second = b.snapshot(2)
        first.release()
        first.release()  # idempotent: still held by the second
        assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
        second.release()
        assert gc.get_threshold() == (700, 10, 10)
        dropped = b.snapshot(3)
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        del dropped  # never released: its finalizer ends the hold
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(10**6, 10, 10)
        b.snapshot(4).release()
        assert gc.get_threshold() == (10**6, 10, 10), "a higher threshold is left alone"
    finally:
        gc.set_threshold(*saved)
