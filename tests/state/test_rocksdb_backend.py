"""The RocksDB keyed state backend against a real RocksDB in tmp_path, checked against the
heap backend: same answers to the same operations, same canonical snapshot content,
checkpoints through real files, rescaling, damage, and memory bounded by the cache."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from barrierflow import _envelope, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import ConfigurationError, StateRestoreError, StreamCorruptionError
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import (
    KEYED_STATE,
    HeapKeyedStateBackend,
    decode_key_group,
)
from barrierflow.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
)
from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend, native_to_canonical
from barrierflow.state.rocksdb_encoding import (
    NATIVE_KIND,
    decode_key,
    decode_list,
    decode_value,
    encode_key,
    encode_list,
    encode_value,
    key_group_prefix,
    key_part,
    section_kind,
    state_prefix,
)

MAX_P = 128
ALL = KeyGroupRange(0, MAX_P - 1)
SETTINGS = EmbeddedRocksDBStateBackend(block_cache_mb=8, write_buffer_mb=8)


@dataclass(frozen=True)
class Point:
    x: int
    y: int


@pytest.fixture
def make_rocks(tmp_path):
    made: list[RocksDBKeyedStateBackend] = []

    def make(key_groups: KeyGroupRange = ALL, max_parallelism: int = MAX_P):
        backend = RocksDBKeyedStateBackend(
            key_groups, max_parallelism, SETTINGS, str(tmp_path / "local")
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.dispose()


def heap_canonical(backend: HeapKeyedStateBackend) -> bytes:
    """The heap backend's canonical bytes, before and after its snapshot became two parts."""
    snapshot = backend.snapshot()
    return snapshot if isinstance(snapshot, bytes) else canonical_bytes(backend)


def content(data: bytes) -> tuple[list, dict[int, list[dict]]]:
    """(states, {key group: [dict per state]}) of a canonical keyed-state envelope."""
    header, body = _envelope.decode(data, KEYED_STATE)
    names = [name for name, _ in header["states"]]
    groups = {
        int(g): decode_key_group(body, int(g), o, n, names)
        for g, (o, n) in header["key_groups"].items()
    }
    return header["states"], groups


def flat(data: bytes) -> dict[tuple[str, Any], Any]:
    """{(state, key): value} of a canonical envelope, whatever the key groups' cut."""
    states, groups = content(data)
    found = {}
    for per_state in groups.values():
        for (name, _), entries in zip(states, per_state, strict=True):
            for key, value in entries.items():
                found[(name, key)] = value
    return found


# ---- encoding -------------------------------------------------------------------------------

KEYS = [
    "",
    "alice",
    0,
    -1,
    7,
    2**63 - 1,
    -(2**63),
    2**100,
    -(2**100),
    2.5,
    float("inf"),
    None,
    b"",
    b"\x00\xff",
    (),
    ("alice", 7),
    (("nested", b"x"), None, 2.5),
    Point(1, 2),
    frozenset({1, 2}),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_keys_round_trip(key):
    assert decode_key(encode_key(key)) == key


def test_a_str_with_a_lone_surrogate_round_trips():
    assert decode_key(encode_key("\udcff")) == "\udcff"
    assert decode_value(encode_value("\udcff")) == "\udcff"


def test_keys_a_dict_takes_as_equal_encode_equal():
    assert encode_key(1) == encode_key(1.0) == encode_key(True)
    assert encode_key(0) == encode_key(-0.0) == encode_key(False)
    assert encode_key(("a", 1)) == encode_key(("a", True)) == encode_key(("a", 1.0))
    assert decode_key(encode_key(True)) == 1 and type(decode_key(encode_key(True))) is int
    assert len({encode_key(k) for k in KEYS}) == len(KEYS)
    with pytest.raises(TypeError):
        encode_key(["a", "list"])


def test_no_key_part_is_a_prefix_of_another():
    parts = [key_part(k) for k in [*KEYS, "a" * 200, "a" * 127, "a" * 128, ("a" * 300, 1)]]
    for a in parts:
        for b in parts:
            assert a == b or not b.startswith(a)


def test_a_key_groups_keys_lie_between_its_prefix_and_the_next():
    for key in KEYS + [f"user-{i}" for i in range(300)]:
        group = assign_to_key_group(key, MAX_P)
        for state_id in (0, 1, 300):
            db_key = state_prefix(group, state_id) + key_part(key) + encode_key("map key")
            assert key_group_prefix(group) <= db_key < key_group_prefix(group + 1)
    assert key_group_prefix(255) < key_group_prefix(256)  # big-endian: numeric order


@pytest.mark.parametrize(
    "value",
    [0, -5, 2**64, True, False, 1.5, float("-inf"), "text", b"raw", None, Point(3, 4), [1, "a"]],
    ids=repr,
)
def test_values_round_trip_with_their_type(value):
    decoded = decode_value(encode_value(value))
    assert decoded == value and type(decoded) is type(value)


def test_lists_round_trip():
    values = [1, "two", 3.0, b"4", Point(5, 6), True, "x" * 1000]
    assert decode_list(encode_list(values)) == values
    assert decode_list(encode_list([])) == []


# ---- the same answers as the heap backend -----------------------------------------------------


def run_scenario(backend) -> list[Any]:
    """Every state type's operations; returns what each read answered."""
    seen: list[Any] = []
    value = backend.get_value_state(ValueStateDescriptor("value"))
    items = backend.get_list_state(ListStateDescriptor("list"))
    table = backend.get_map_state(MapStateDescriptor("map"))
    for key in ["a", "b", 7, ("t", 1), b"k", Point(1, 1)]:
        backend.set_current_key(key)
        seen.append(value.value())
        value.update(1)
        value.update(value.value() + 1)
        seen.append(value.value())
        items.add(key)
        items.add_all([1, 2])
        items.add_all(None)
        items.add_all([])
        seen.append(items.get())
        table.put("x", 1)
        table.put_all({"y": None, 3: [1, 2]})
        table.put_all({})
        seen += [table.get("x"), table.get("y"), table.contains("y"), table.get("nope")]
        seen += [sorted(map(repr, table.keys())), sorted(map(repr, table.values()))]
        seen += [sorted(map(repr, table.items())), table.is_empty(), "x" in table, table[3]]
    backend.set_current_key("a")
    value.update(None)
    seen.append(value.value())
    items.update([])
    seen.append(items.get())
    items.update(["only"])
    seen.append(items.get())
    with pytest.raises(ValueError):
        items.add(None)
    with pytest.raises(ValueError):
        items.add_all([1, None])
    with pytest.raises(ValueError):
        items.update([None])
    seen.append(items.get())
    table.remove("x")
    table.remove("y")
    table.remove("absent")
    seen += [table.is_empty(), table.items()]
    table.remove(3)
    seen += [table.is_empty(), table.keys(), table.get(3)]
    backend.set_current_key("b")
    table.clear()
    items.clear()
    value.clear()
    seen += [table.is_empty(), items.get(), value.value()]
    backend.set_current_key(1.0)  # the same key as 1 and True, as in a dict
    value.update("one")
    backend.set_current_key(True)
    seen.append(value.value())
    for name in ("value", "list", "map", "unknown"):
        seen.append(set(backend.keys(name)))  # 1.0 reads back as 1 from RocksDB: equal
    return seen


def test_every_state_type_answers_as_the_heap_backend(make_rocks):
    rocks = make_rocks()
    heap = HeapKeyedStateBackend(ALL, MAX_P)
    assert run_scenario(rocks) == run_scenario(heap)
    assert content(canonical_bytes(rocks)) == content(heap_canonical(heap))


def test_a_value_read_is_a_copy_until_written_back(make_rocks):
    rocks = make_rocks()
    state = rocks.get_value_state(ValueStateDescriptor("v"))
    rocks.set_current_key("k")
    state.update([1])
    state.value().append(2)
    assert state.value() == [1]
    current = state.value()
    current.append(2)
    state.update(current)
    assert state.value() == [1, 2]


def test_errors_are_the_heap_backends(make_rocks):
    rocks = make_rocks(key_group_range_for_subtask(MAX_P, 2, 0))
    heap = HeapKeyedStateBackend(key_group_range_for_subtask(MAX_P, 2, 0), MAX_P)
    outside = next(k for k in range(1000) if assign_to_key_group(k, MAX_P) >= 64)
    messages = []
    for backend in (rocks, heap):
        state = backend.get_value_state(ValueStateDescriptor("v"))
        with pytest.raises(ConfigurationError, match="before set_current_key") as error:
            state.value()
        with pytest.raises(StreamCorruptionError) as error:
            backend.set_current_key(outside)
        messages.append(str(error.value))
        inside = next(k for k in ([i] for i in range(1000)) if assign_to_key_group(k, MAX_P) < 64)
        backend.set_current_key(inside)  # a list: routed, but no dict key
        with pytest.raises(ConfigurationError, match="hashable key"):
            state.update(1)
        with pytest.raises(ConfigurationError, match="cannot also be list state"):
            backend.get_list_state(ListStateDescriptor("v"))
    assert messages[0] == messages[1]


def test_an_unpicklable_value_names_the_state_and_key(make_rocks):
    rocks = make_rocks()
    rocks.set_current_key("the-key")
    with pytest.raises(ConfigurationError, match=r"state 'held'.*'the-key'.*cannot be pickled"):
        rocks.get_value_state(ValueStateDescriptor("held")).update(threading.Lock())
    with pytest.raises(ConfigurationError, match=r"state 'items'.*'the-key'"):
        rocks.get_list_state(ListStateDescriptor("items")).add(threading.Lock())
    with pytest.raises(ConfigurationError, match=r"map key .* of state 'map'"):
        rocks.get_map_state(MapStateDescriptor("map")).put(Unpicklable(), 1)


class Unpicklable:
    def __reduce__(self):
        raise TypeError("no pickling")

    def __hash__(self) -> int:
        return 1


# ---- checkpoints, savepoints, restore ---------------------------------------------------------


def fill(backend, keys, offset: int = 0) -> None:
    value = backend.get_value_state(ValueStateDescriptor("count"))
    items = backend.get_list_state(ListStateDescriptor("seen"))
    table = backend.get_map_state(MapStateDescriptor("window-contents"))
    for key in keys:
        backend.set_current_key(key)
        value.update(key_number(key) + offset)
        items.add_all([key, offset])
        table.put(("w", offset), {"n": key_number(key)})


def key_number(key: str) -> int:
    return int(key.split("-")[1])


def keys_of(key_groups: KeyGroupRange, count: int = 2000) -> list[str]:
    return [f"k-{i}" for i in range(count) if assign_to_key_group(f"k-{i}", MAX_P) in key_groups]


def checkpoint(backend, folder: Path, name: str) -> bytes:
    """Snapshot `backend` and write it as a checkpoint does, beside a state file in `folder`."""
    snapshot = backend.snapshot()
    try:
        return snapshot.write(_fs.location(str(folder)).child(name))
    finally:
        snapshot.release()


def test_checkpoint_write_and_restore_into_a_fresh_backend(make_rocks, tmp_path):
    rocks = make_rocks()
    fill(rocks, keys_of(ALL))
    expected = content(canonical_bytes(rocks))
    snapshot = rocks.snapshot()
    local = [p for p in Path(rocks._dir).iterdir() if p.name.startswith("chk-")]
    assert len(local) == 1
    section = snapshot.write(_fs.location(str(tmp_path / "chk-1")).child("rocks-0"))
    snapshot.release()
    assert not local[0].exists()
    assert section_kind(section) == NATIVE_KIND
    header, _ = _envelope.decode(section, NATIVE_KIND)
    assert header["states"] == [["count", "value"], ["seen", "list"], ["window-contents", "map"]]
    for name, size, _crc in header["files"]:
        assert name.startswith("rocks-0/")
        assert (tmp_path / "chk-1" / name).stat().st_size == size
    fill(rocks, keys_of(ALL)[:10], offset=99)  # after the snapshot: not in it
    restored = make_rocks()
    restored.restore([section], _fs.location(str(tmp_path / "chk-1")))
    assert content(canonical_bytes(restored)) == expected
    restored.set_current_key("k-3")
    assert restored.get_value_state(ValueStateDescriptor("count")).value() == 3
    fill(restored, ["k-3"], offset=1)  # the restored database takes writes
    assert restored.get_value_state(ValueStateDescriptor("count")).value() == 4
    assert native_to_canonical(section, _fs.location(str(tmp_path / "chk-1"))) is not None
    assert content(native_to_canonical(section, _fs.location(str(tmp_path / "chk-1")))) == expected


def test_savepoint_is_the_heap_backends_canonical_envelope(make_rocks):
    rocks = make_rocks()
    heap = HeapKeyedStateBackend(ALL, MAX_P)
    for backend in (rocks, heap):
        fill(backend, keys_of(ALL, 500))
        fill(backend, keys_of(ALL, 100), offset=5)
    savepoint = canonical_bytes(rocks)
    assert content(savepoint) == content(heap_canonical(heap))
    back_in_heap = HeapKeyedStateBackend(ALL, MAX_P)
    back_in_heap.restore([savepoint])
    assert content(heap_canonical(back_in_heap)) == content(savepoint)
    back_in_rocks = make_rocks()
    back_in_rocks.restore([heap_canonical(heap)])
    assert content(canonical_bytes(back_in_rocks)) == content(savepoint)


def test_rescale_two_three_one_from_native_checkpoints(make_rocks, tmp_path):
    keys = keys_of(ALL, 3000)
    expected = None
    sections = []
    for index in range(2):
        backend = make_rocks(key_group_range_for_subtask(MAX_P, 2, index))
        fill(backend, keys_of(backend.key_group_range, 3000))
        sections.append(checkpoint(backend, tmp_path / "chk-1", f"p2-{index}"))
        backend.dispose()
    reference = HeapKeyedStateBackend(ALL, MAX_P)
    fill(reference, keys)
    expected = flat(heap_canonical(reference))

    three = [make_rocks(key_group_range_for_subtask(MAX_P, 3, i)) for i in range(3)]
    sections3 = []
    for index, backend in enumerate(three):
        backend.restore(sections, _fs.location(str(tmp_path / "chk-1")))
        _states, groups = content(canonical_bytes(backend))
        assert set(groups) <= set(backend.key_group_range)  # clipped to its range
        sections3.append(checkpoint(backend, tmp_path / "chk-2", f"p3-{index}"))
    one = make_rocks()
    one.restore(sections3, _fs.location(str(tmp_path / "chk-2")))
    assert flat(canonical_bytes(one)) == expected
    assert sorted(one.keys("count")) == sorted(keys)


def test_restore_clips_an_adopted_checkpoint_to_the_range(make_rocks, tmp_path):
    whole = make_rocks()
    fill(whole, keys_of(ALL))
    section = checkpoint(whole, tmp_path / "chk-1", "whole")
    part = make_rocks(KeyGroupRange(10, 20))
    part.restore([section], _fs.location(str(tmp_path / "chk-1")))
    assert set(content(canonical_bytes(part))[1]) == set(range(10, 21)) & set(
        content(canonical_bytes(whole))[1]
    )
    assert sorted(part.keys("count")) == sorted(keys_of(KeyGroupRange(10, 20)))


def test_restore_from_the_canonical_format_of_another_parallelism(make_rocks):
    heap = HeapKeyedStateBackend(key_group_range_for_subtask(MAX_P, 2, 1), MAX_P)
    fill(heap, keys_of(heap.key_group_range))
    rocks = make_rocks(key_group_range_for_subtask(MAX_P, 3, 1))
    rocks.restore([heap_canonical(heap)])
    both = heap.key_group_range.intersection(rocks.key_group_range)
    assert sorted(rocks.keys("count")) == sorted(keys_of(both))


# ---- damage ---------------------------------------------------------------------------------


@pytest.fixture
def checkpointed(make_rocks, tmp_path):
    backend = make_rocks()
    fill(backend, keys_of(ALL, 300))
    return checkpoint(backend, tmp_path / "chk-1", "files"), tmp_path / "chk-1"


def test_a_damaged_checkpoint_file_is_a_restore_error(make_rocks, checkpointed):
    section, folder = checkpointed
    sst = next(p for p in (folder / "files").iterdir() if p.suffix == ".sst")
    data = bytearray(sst.read_bytes())
    data[len(data) // 2] ^= 0xFF
    sst.write_bytes(bytes(data))
    with pytest.raises(StateRestoreError, match=r"damaged RocksDB checkpoint file .*\.sst"):
        make_rocks().restore([section], _fs.location(str(folder)))


def test_a_missing_checkpoint_file_is_a_restore_error(make_rocks, checkpointed):
    section, folder = checkpointed
    next(p for p in (folder / "files").iterdir() if p.name.startswith("MANIFEST")).unlink()
    with pytest.raises(StateRestoreError, match=r"RocksDB checkpoint file .*MANIFEST.* is missing"):
        make_rocks().restore([section], _fs.location(str(folder)))


def test_a_damaged_section_another_max_parallelism_or_kind_is_a_restore_error(
    make_rocks, checkpointed
):
    section, folder = checkpointed
    base = _fs.location(str(folder))
    damaged = bytearray(section)
    damaged[-3] ^= 0x01
    with pytest.raises(StateRestoreError, match="checksum"):
        make_rocks().restore([bytes(damaged)], base)
    with pytest.raises(StateRestoreError, match="max parallelism 128, this operator has 256"):
        make_rocks(max_parallelism=256).restore([section], base)
    other_kind = make_rocks()
    other_kind.get_list_state(ListStateDescriptor("count"))
    with pytest.raises(StateRestoreError, match="'count' as value state, this job declares it"):
        other_kind.restore([section], base)
    restored = make_rocks()
    restored.restore([section], base)
    with pytest.raises(StateRestoreError, match="holds state 'count' as value state"):
        restored.get_map_state(MapStateDescriptor("count"))
    with pytest.raises(StateRestoreError, match="appears in two"):
        make_rocks().restore([section, section], base)


def test_a_storage_fault_during_upload_is_an_os_error(make_rocks, tmp_path, storage_faults):
    backend = make_rocks()
    fill(backend, keys_of(ALL, 100))
    storage_faults("write:*/side/*:2")
    with pytest.raises(OSError, match="injected storage fault"):
        checkpoint(backend, tmp_path / "chk-1", "side")
    assert not [p for p in Path(backend._dir).iterdir() if p.name.startswith("chk-")]


def test_dispose_deletes_the_local_folder(tmp_path):
    backend = RocksDBKeyedStateBackend(ALL, MAX_P, SETTINGS, str(tmp_path / "local"))
    fill(backend, keys_of(ALL, 50))
    backend.snapshot()  # a local checkpoint never released: dispose takes it too
    folder = Path(backend._dir)
    assert folder.exists()
    backend.dispose()
    assert not folder.exists()


# ---- memory ---------------------------------------------------------------------------------

MEMORY_CHILD = textwrap.dedent(
    """
    import json, os, random, sys
    import psutil
    from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
    from barrierflow.state import ValueStateDescriptor
    from barrierflow.state.key_groups import KeyGroupRange
    from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend

    settings = EmbeddedRocksDBStateBackend(block_cache_mb=8, write_buffer_mb=8)
    backend = RocksDBKeyedStateBackend(KeyGroupRange(0, 127), 128, settings, sys.argv[1])
    state = backend.get_value_state(ValueStateDescriptor("blob"))
    process = psutil.Process()
    count, size = int(sys.argv[2]), 1024
    backend.set_current_key(-1)
    state.update(os.urandom(size))
    before = process.memory_info().rss
    for i in range(count):
        backend.set_current_key(i)
        state.update(os.urandom(size))
    written = process.memory_info().rss
    random.seed(1)
    for i in random.sample(range(count), 20000):
        backend.set_current_key(i)
        assert len(state.value()) == size
    snapshot = backend.snapshot()
    snapshot.release()
    print(json.dumps({"before": before, "written": written,
                      "after": process.memory_info().rss, "state": count * size}))
    backend.dispose()
    """
)


def test_rss_stays_bounded_with_state_many_times_the_cache(tmp_path):
    """300 MiB of incompressible values with an 8 MiB cache and 8 MiB of write buffers."""
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(tmp_path), str(300 * 1024)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    growth = max(figures["written"], figures["after"]) - figures["before"]
    assert figures["state"] >= 300 * 2**20
    assert growth < 80 * 2**20, f"RSS grew {growth / 2**20:.0f} MiB for 300 MiB of state"


def test_a_snapshot_filter_applies_to_savepoints_not_to_live_state(make_rocks, tmp_path):
    rocks = make_rocks()
    fill(rocks, [f"k-{i}" for i in range(20)])
    rocks.set_snapshot_filter("count", lambda n: None if n % 2 else n * 10)
    section = checkpoint(rocks, tmp_path / "chk-1", "files")
    savepoint = flat(canonical_bytes(rocks))
    assert {k: v for (name, k), v in savepoint.items() if name == "count"} == {
        f"k-{i}": i * 10 for i in range(0, 20, 2)
    }
    rocks.set_current_key("k-3")
    assert rocks.get_value_state(ValueStateDescriptor("count")).value() == 3
    native = make_rocks()
    native.restore([section], _fs.location(str(tmp_path / "chk-1")))
    assert sorted(native.keys("count")) == sorted(f"k-{i}" for i in range(20))
    rocks.set_snapshot_filter("count", None)
    assert len([k for name, k in flat(canonical_bytes(rocks)) if name == "count"]) == 20


def test_the_heap_backend_restores_a_rocksdb_checkpoint(make_rocks, tmp_path):
    rocks = make_rocks(key_group_range_for_subtask(MAX_P, 2, 0))
    fill(rocks, keys_of(rocks.key_group_range))
    section = checkpoint(rocks, tmp_path / "chk-1", "files")
    heap = HeapKeyedStateBackend(key_group_range_for_subtask(MAX_P, 3, 0), MAX_P)
    heap.restore([section], _fs.location(str(tmp_path / "chk-1")))
    assert sorted(heap.keys("count")) == sorted(keys_of(heap.key_group_range))
    assert flat(heap_canonical(heap)) == {
        (name, key): value
        for (name, key), value in flat(canonical_bytes(rocks)).items()
        if assign_to_key_group(key, MAX_P) in heap.key_group_range
    }


def test_states_of_sections_outside_the_range_are_registered_as_the_heap_backend_does(
    make_rocks, tmp_path
):
    sections, canonical = [], []
    for index in range(2):
        backend = make_rocks(key_group_range_for_subtask(MAX_P, 2, index))
        fill(backend, keys_of(backend.key_group_range, 300))
        if index == 1:
            backend.get_value_state(ValueStateDescriptor("only-in-the-second"))
        sections.append(checkpoint(backend, tmp_path / "chk-1", f"p2-{index}"))
        canonical.append(canonical_bytes(backend))
    base = _fs.location(str(tmp_path / "chk-1"))
    for key_groups in (KeyGroupRange(0, 10), KeyGroupRange(60, 70)):  # adopted; copied
        rocks = make_rocks(key_groups)
        rocks.restore(sections, base)
        heap = HeapKeyedStateBackend(key_groups, MAX_P)
        heap.restore(canonical)
        assert content(canonical_bytes(rocks)) == content(heap_canonical(heap))
        assert content(canonical_bytes(rocks))[0][-1] == ["only-in-the-second", "value"]
