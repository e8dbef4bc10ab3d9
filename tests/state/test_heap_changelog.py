"""Changelog checkpoints of the heap backend (`state/heap_changelog.py`), event by event,
with real files in a job folder: what each delta holds, the chain's reuse rule, restores
(also rescaled and into the RocksDB backend), materialization, and the bytes uploaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from barrierflow import _envelope, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.batched import BatchValueState
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.heap_changelog import (
    CHANGELOG_KIND,
    DELTA_KIND,
    DELTA_RATIO,
    MAX_DELTAS,
    Chain,
    DirtyLog,
    base_due,
    changelog_to_canonical,
    read_manifest,
    union_dirty,
)
from barrierflow.state.heap_sections import decode_section
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.rocksdb_encoding import section_kind

MAX_P = 128
VALUE = ValueStateDescriptor("v")


def backend(rng: KeyGroupRange | None = None, changelog: bool = True) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(rng or KeyGroupRange(0, MAX_P - 1), MAX_P, changelog=changelog)


def put(b: HeapKeyedStateBackend, key: Any, value: Any) -> None:
    b.set_current_key(key)
    b.get_value_state(VALUE).update(value)


class Job:
    """A real job folder: checkpoints write their manifests into chk-<n>/ and files into shared/."""

    def __init__(self, path: Path) -> None:
        self.folder = _fs.location(str(path))
        self.shared = self.folder.child("shared")

    def checkpoint(
        self, b: HeapKeyedStateBackend, checkpoint_id: int, complete: bool = True
    ) -> tuple[bytes, list[tuple[str, int, bool]]]:
        snapshot = b.snapshot(checkpoint_id)
        chk = self.folder.child(f"chk-{checkpoint_id}")
        _fs.make_dirs(chk)
        try:
            section = snapshot.write(chk.child("side"), self.shared)
            files = snapshot.shared_files()
        finally:
            snapshot.release()
        _fs.write_bytes(chk.child("keyed"), section)
        if complete:
            b.notify_checkpoint_complete(checkpoint_id)
        return section, files

    def chk(self, checkpoint_id: int) -> _fs.Location:
        return self.folder.child(f"chk-{checkpoint_id}")

    def file(self, name: str) -> _fs.Location:
        """A file a manifest names (relative to the job folder)."""
        return self.folder.child(*name.split("/"))

    def delta(self, files: list[tuple[str, int, bool]]) -> dict[int, list[Any]]:
        """The new delta file among `files`, decoded: key group -> [[keys, values]] per state."""
        (name,) = [name for name, _, new in files if new]
        assert name.endswith(".heapdelta")
        header, body = _envelope.decode(_fs.read_bytes(self.file(name)), DELTA_KIND)
        states = len(header["states"])
        return {
            int(g): decode_section(body[o : o + n], states)
            for g, (o, n) in header["key_groups"].items()
        }


def changed_keys(delta: dict[int, list[Any]]) -> tuple[dict[Any, Any], set[Any]]:
    changed: dict[Any, Any] = {}
    removed: set[Any] = set()
    for per_state in delta.values():
        for keys, values in per_state:
            assert len(keys) == len(values) == len(set(keys))
            for key, value in zip(keys, values, strict=True):
                if value is None:
                    removed.add(key)
                else:
                    changed[key] = value
    return changed, removed


def state_of(b: HeapKeyedStateBackend) -> dict[str, dict[Any, Any]]:
    """Every state's key -> value of `b` (read through a canonical restore)."""
    copy = backend(b.key_group_range, changelog=False)
    copy.restore([canonical_bytes(b)])
    return {
        name: {key: table.live[i][key] for i in range(copy._count) for key in table.live[i]}
        for name, table in copy._tables.items()
    }


def a_base_and_one_delta(job: Job) -> tuple[bytes, str, int]:
    """Checkpoints 1 (a base) and 2 (a delta) of one key: checkpoint 2's manifest and the
    delta file's name (relative to the job folder) and size."""
    b = backend()
    put(b, "a", 1)
    job.checkpoint(b, 1)
    put(b, "a", 2)
    section, files = job.checkpoint(b, 2)
    name, size, _ = files[-1]
    return section, name, size


# ---- the pure bookkeeping ---------------------------------------------------------------------


def test_dirty_log_event_by_event() -> None:
    log = DirtyLog()
    confirmed, records = log.snapshot(1, {"v": {0: {"a"}}})
    assert confirmed is None and [r.checkpoint_id for r in records] == [1]
    chain1 = Chain("f", ("shared/b", 100))
    records[-1].chain = chain1
    log.complete(1)
    assert log.confirmed == chain1 and log.pending == []
    # checkpoint 2 aborts: its keys stay pending and fold into 3's delta
    _, records = log.snapshot(2, {"v": {0: {"b"}}})
    records[-1].chain = Chain("f", ("shared/b", 100), (("shared/d2", 5),))
    confirmed, records = log.snapshot(3, {"v": {1: {"c"}}})
    assert confirmed == chain1, "3 builds on the completed 1, never on the uncompleted 2"
    assert [r.checkpoint_id for r in records] == [2, 3]
    chain3 = Chain("f", ("shared/b", 100), (("shared/d3", 9),))
    records[-1].chain = chain3
    log.complete(3)
    assert log.confirmed == chain3 and log.pending == []
    log.complete(2)  # late notification of the aborted one: nothing
    assert log.confirmed == chain3
    # a snapshot whose write made no chain (a savepoint) completes: nothing changes
    log.snapshot(4, {"v": {0: {"d"}}})
    log.complete(4)
    assert log.confirmed == chain3 and [r.checkpoint_id for r in log.pending] == [4]
    log.restored(None)
    assert log.confirmed is None and log.pending == []


def test_chain_needs_base() -> None:
    chain = Chain("f", ("shared/b", 100), (("shared/d1", 60),))
    assert not chain.needs_base("f")
    assert chain.needs_base("other"), "a chain of another job folder is never continued"
    at_limit = Chain("f", ("shared/b", 100), (("d1", 100), ("d2", 100)))
    assert not at_limit.needs_base("f"), f"deltas up to {DELTA_RATIO}x the base are kept"
    over = Chain("f", ("shared/b", 100), (("d1", 100), ("d2", 101)))
    assert over.needs_base("f")
    many = tuple((f"d{i}", 1) for i in range(MAX_DELTAS))
    assert Chain("f", ("shared/b", 10**6), many).needs_base("f")
    # a state that grew since its base: the limit scales with its entries (never shrinks)
    grown = Chain("f", ("shared/b", 100), (("d1", 300),), base_entries=10)
    assert grown.needs_base("f", 10) and grown.needs_base("f", 14)
    assert not grown.needs_base("f", 15), "15 entries: estimated 150 bytes, deltas 2x that"
    assert grown.needs_base("f", 5), "a shrunk state keeps the base's size as its estimate"
    assert Chain("f", ("shared/b", 100), (("d1", 201),)).needs_base("f", 10**6), "unknown"
    # values that grew since the base: the newest delta's bytes per entry count
    longer = Chain("f", ("shared/b", 100), (("d1", 300),), base_entries=10, entry_bytes=20.0)
    assert not longer.needs_base("f", 10), "10 entries of 20 bytes: deltas up to 400"
    assert longer.needs_base("f", 7), "7 entries of 20 bytes: 280"


# ---- the backend, with real files -----------------------------------------------------------


def test_deltas_hold_exactly_the_changes_tombstones_and_reset_keys(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(100):
        put(b, i, i)
    _, files = job.checkpoint(b, 1)
    assert [(name.endswith(".heapbase"), new) for name, _, new in files] == [(True, True)]
    put(b, 1, "one")
    b.set_current_key(2)
    b.get_value_state(VALUE).clear()  # cleared: a tombstone
    b.set_current_key(3)
    b.get_value_state(VALUE).clear()
    put(b, 3, "three again")  # cleared then set again: its value
    b.set_current_key(4)
    b.get_value_state(VALUE).value()  # an int read: not a change
    _, files = job.checkpoint(b, 2)
    assert [new for _, _, new in files] == [False, True]
    changed, removed = changed_keys(job.delta(files))
    assert changed == {1: "one", 3: "three again"} and removed == {2}
    # nothing changed: an empty delta
    _, files = job.checkpoint(b, 3)
    assert changed_keys(job.delta(files)) == ({}, set())


def test_in_place_changes_lists_maps_and_batches_are_dirty(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    lists = b.get_list_state(ListStateDescriptor("l"))
    maps = b.get_map_state(MapStateDescriptor("m"))
    values = b.get_value_state(VALUE)
    for key in ("x", "y"):
        b.set_current_key(key)
        lists.add(1)
        maps.put_all({i: i for i in range(10)})
        values.update({"n": 1})
    job.checkpoint(b, 1)
    b.set_current_key("x")
    lists.add(2)
    maps.put("b", 2)
    values.value()["n"] = 2  # changed in place, without update()
    BatchValueState(values).put_many(["z"], [{"n": 3}])
    _, files = job.checkpoint(b, 2)
    delta = job.delta(files)
    per_state: dict[str, dict[Any, Any]] = {"v": {}, "l": {}, "m": {}}  # name -> changed
    patches: dict[Any, Any] = {}
    order = [name for name in b._tables]
    for sections in delta.values():
        for name, (keys, changed, *patched) in zip(order, sections, strict=True):
            per_state[name].update(zip(keys, changed, strict=True))
            if patched:
                patches.update(zip(*patched, strict=True))
    assert per_state == {"v": {"x": {"n": 2}, "z": {"n": 3}}, "l": {"x": [1, 2]}, "m": {}}
    assert patches == {"x": [["b"], [2], []]}, "a map put is one entry, not the map"


def map_changes(job: Job, b: HeapKeyedStateBackend, files: list[Any], name: str) -> Any:
    """State `name`'s change in the new delta: {key: whole map or None}, {key: patch}."""
    order = list(b._tables)
    whole: dict[Any, Any] = {}
    patches: dict[Any, Any] = {}
    for sections in job.delta(files).values():
        keys, values, *patched = sections[order.index(name)]
        whole.update(zip(keys, values, strict=True))
        if patched:
            patches.update(
                (key, (dict(zip(user_keys, user_values, strict=True)), set(removed)))
                for key, (user_keys, user_values, removed) in zip(*patched, strict=True)
            )
    return whole, patches


def test_map_states_write_the_entries_that_changed(tmp_path: Path) -> None:
    """Event by event: a put, a removal, a read of a mutable value (changed in place) and
    put_all are entries of a patch; a new map, a cleared one, one emptied by its last
    removal and one read through items() are written whole; a read of an immutable
    value or of the keys is no change. The chain restores the state exactly."""
    job, b = Job(tmp_path), backend()
    maps = b.get_map_state(MapStateDescriptor("m"))
    for key in "abcdefg":
        b.set_current_key(key)
        maps.put_all({i: [i] if key == "c" else i for i in range(100)})
    b.set_current_key("h")
    maps.put(0, 0)
    job.checkpoint(b, 1)
    b.set_current_key("a")
    maps.put(5, -5)
    maps.remove(6)
    maps.remove(1000)  # absent: no change
    assert maps.get(7) == 7 and maps.contains(8) and len(maps.keys()) == 99  # no change
    b.set_current_key("b")
    maps.put_all({200: 200, 3: -3})
    b.set_current_key("c")
    maps.get(9).append("in place")  # a mutable value handed out
    b.set_current_key("d")
    maps.clear()
    b.set_current_key("e")
    maps.items()  # every value handed out: the whole map
    b.set_current_key("f")
    maps.put(1, -1)
    maps.clear()
    maps.put(2, -2)  # cleared, then a new map: written whole
    b.set_current_key("h")
    maps.remove(0)  # its last entry: the key goes
    b.set_current_key("n")
    maps.put("new", 1)
    b.set_current_key("s")
    maps.put_all({1: 1, 2: 2})
    section, files = job.checkpoint(b, 2)
    whole, patches = map_changes(job, b, files, "m")
    assert patches == {
        "a": ({5: -5}, {6}),
        "b": ({200: 200, 3: -3}, set()),
        "c": ({9: [9, "in place"]}, set()),
    }
    e_map = {i: i for i in range(100)}
    assert whole == {
        "d": None, "e": e_map, "f": {2: -2}, "h": None, "n": {"new": 1}, "s": {1: 1, 2: 2}
    }  # fmt: skip
    restored = backend()
    restored.restore([section], job.chk(2))
    assert state_of(restored) == state_of(b)
    assert state_of(restored)["m"]["a"] == {i: -5 if i == 5 else i for i in range(100) if i != 6}
    maps.put(1, -1)  # "s": one entry in two, the whole map is smaller than its patch
    b.set_current_key("a")
    maps.put(99, -99)
    section, files = job.checkpoint(b, 3)
    assert map_changes(job, b, files, "m") == (
        {"s": {1: -1, 2: 2}},
        {"a": ({99: -99}, set())},
    )
    restored = backend()
    restored.restore([section], job.chk(3))
    assert state_of(restored) == state_of(b)


def test_map_entries_of_aborted_checkpoints_fold_into_the_next_and_whole_wins(
    tmp_path: Path,
) -> None:
    job, b = Job(tmp_path), backend()
    maps = b.get_map_state(MapStateDescriptor("m"))
    for key in "xyz":
        b.set_current_key(key)
        maps.put_all({i: i for i in range(10)})
    job.checkpoint(b, 1)
    b.set_current_key("x")
    maps.put(1, "aborted")
    b.set_current_key("y")
    maps.put(1, "patched first")
    b.set_current_key("z")
    maps.clear()
    maps.put(1, "whole first")
    job.checkpoint(b, 2, complete=False)
    b.set_current_key("x")
    maps.put(2, "next")
    b.set_current_key("y")
    maps.clear()
    maps.put(3, "whole later")
    b.set_current_key("z")
    maps.put(4, "patched later")
    section, files = job.checkpoint(b, 3)
    whole, patches = map_changes(job, b, files, "m")
    assert patches == {"x": ({1: "aborted", 2: "next"}, set())}
    assert whole == {"y": {3: "whole later"}, "z": {1: "whole first", 4: "patched later"}}
    restored = backend()
    restored.restore([section], job.chk(3))
    assert state_of(restored) == state_of(b)


def test_one_percent_of_map_entries_changed_uploads_under_five_percent(tmp_path: Path) -> None:
    """Few keys with large maps (q16's distinct bidders per channel and day): a delta
    holds the entries that changed, not the maps."""
    job, b = Job(tmp_path), backend()
    maps = b.get_map_state(MapStateDescriptor("m"))
    for key in range(4):
        b.set_current_key(key)
        maps.put_all({i: i for i in range(50_000)})
    _, files = job.checkpoint(b, 1)
    full = files[0][1]
    for key in range(4):
        b.set_current_key(key)
        for i in range(0, 50_000, 100):  # 1 % of the entries
            maps.put(i, -i)
    section, files = job.checkpoint(b, 2)
    uploaded = len(section) + sum(size for _, size, new in files if new)
    assert uploaded < 0.05 * full, (uploaded, full)
    restored = backend()
    restored.restore([section], job.chk(2))
    assert state_of(restored) == state_of(b)


def test_a_delta_of_a_later_version_is_refused(tmp_path: Path) -> None:
    from barrierflow.errors import StateRestoreError

    job = Job(tmp_path)
    section, name, size = a_base_and_one_delta(job)
    location = job.file(name)
    header, body = _envelope.decode(_fs.read_bytes(location), DELTA_KIND)
    header["version"] = 99
    data = _envelope.encode(DELTA_KIND, header, bytes(body))
    assert len(data) == size, "the test keeps the size the manifest names"
    _fs.write_bytes(location, data)
    with pytest.raises(StateRestoreError, match=r"delta .* has version 99"):
        backend().restore([section], job.chk(2))


def test_aborted_checkpoint_folds_into_next_delta(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    put(b, "a", 1)
    job.checkpoint(b, 1)
    put(b, "b", 2)
    _, aborted = job.checkpoint(b, 2, complete=False)
    put(b, "c", 3)
    section, files = job.checkpoint(b, 3)
    aborted_delta = next(name for name, _, new in aborted if new)
    assert aborted_delta not in [name for name, _, _ in files], "never references an aborted delta"
    assert changed_keys(job.delta(files))[0] == {"b": 2, "c": 3}
    restored = backend()
    restored.restore([section], job.chk(3))
    assert state_of(restored) == state_of(b)


def test_chain_restore_equals_state_and_rescales(tmp_path: Path) -> None:
    job = Job(tmp_path)
    halves = [KeyGroupRange(0, 63), KeyGroupRange(64, 127)]
    olds = [backend(r) for r in halves]
    lists, maps = ListStateDescriptor("l"), MapStateDescriptor("m")
    sections: list[bytes] = []
    for n, b in enumerate(olds):
        for i in range(2000):
            key = f"k{i}"
            if key_in(b, key):
                put(b, key, i)
                b.get_list_state(lists).add(i)
                b.get_map_state(maps).put_all({j: i for j in range(8)})
        for checkpoint_id in range(1, 4):
            for i in range(0, 2000, 7 * checkpoint_id):
                key = f"k{i}"
                if key_in(b, key):
                    put(b, key, None if i % 3 == 0 else -i)
                    b.get_map_state(maps).put(checkpoint_id, -i)  # patches
                    b.get_map_state(maps).remove(7)
            job.checkpoint(b, checkpoint_id * 10 + n)
        section, files = job.checkpoint(b, 40 + n)
        assert len(files) > 2, "a chain of a base and deltas"
        sections.append(section)
        assert section_kind(section) == CHANGELOG_KIND
    expected: dict[str, dict[Any, Any]] = {"v": {}, "l": {}, "m": {}}
    for b in olds:
        for name, entries in state_of(b).items():
            expected[name].update(entries)
    # the manifests resolve against their own checkpoint folder's job folder
    base = job.chk(40)
    thirds = [KeyGroupRange(0, 42), KeyGroupRange(43, 85), KeyGroupRange(86, 127)]
    news = [backend(r) for r in thirds]
    for b in news:
        b.restore(sections, base)
        assert b._changelog.confirmed is None, "restored from two manifests: the next writes a base"
    merged: dict[str, dict[Any, Any]] = {"v": {}, "l": {}, "m": {}}
    for b in news:
        for name, entries in state_of(b).items():
            merged[name].update(entries)
    assert merged == expected
    # 3 -> 1 through a new chain per subtask
    job2 = Job(tmp_path / "second")
    manifests = []
    for n, b in enumerate(news):
        section, files = job2.checkpoint(b, 1 + n)
        assert [name.endswith(".heapbase") for name, _, _ in files] == [True]
        manifests.append(section)
    one = backend()
    one.restore(manifests, job2.chk(1))
    assert state_of(one) == expected


def key_in(b: HeapKeyedStateBackend, key: Any) -> bool:
    from barrierflow.state.key_groups import stable_hash

    return stable_hash(key) % MAX_P in b.key_group_range


def test_materializes_when_deltas_outgrow_the_base(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(1000):
        put(b, i, i)
    _, files = job.checkpoint(b, 1)
    base_size = files[0][1]
    checkpoint_id = 1
    written = 0
    while True:
        checkpoint_id += 1
        for i in range(0, 1000, 4):
            put(b, i, i + checkpoint_id)
        _, files = job.checkpoint(b, checkpoint_id)
        if files[-1][0].endswith(".heapbase"):
            break
        written += files[-1][1]
        files_before = files
    assert len(files) == 1 and files[0][2], "a new base alone"
    assert written > DELTA_RATIO * base_size, "only once the deltas outgrew the ratio"
    assert written - files_before[-1][1] <= DELTA_RATIO * base_size, "and not later"
    restored = backend()
    restored.restore(
        [_fs.read_bytes(job.chk(checkpoint_id).child("keyed"))], job.chk(checkpoint_id)
    )
    assert state_of(restored) == state_of(b)


def test_restore_continues_a_chain_of_the_same_job_folder_only(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(200):
        put(b, i, i)
    job.checkpoint(b, 1)
    put(b, 1, "x")
    section, files = job.checkpoint(b, 2)
    same = backend()
    same.restore([section], job.chk(2))
    put(same, 2, "y")
    _, continued = job.checkpoint(same, 3)
    assert [name for name, _, _ in continued][:2] == [name for name, _, _ in files]
    assert [new for _, _, new in continued] == [False, False, True]
    other_job = Job(tmp_path / "other")
    moved = backend()
    moved.restore([section], job.chk(2))
    _, fresh = other_job.checkpoint(moved, 3)
    assert len(fresh) == 1 and fresh[0][0].endswith(".heapbase") and fresh[0][2]
    assert state_of(moved)["v"][1] == "x"


def test_savepoints_stay_canonical_and_off_changes_nothing(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    put(b, "a", 1)
    snapshot = b.snapshot(1)
    assert section_kind(snapshot.write(None)) == "keyed-state"
    assert snapshot.shared_files() == []
    snapshot.release()
    b.notify_checkpoint_complete(1)
    assert b._changelog.confirmed is None, "a savepoint's completion makes no chain"
    off = backend(changelog=False)
    put(off, "a", 1)
    section, files = job.checkpoint(off, 1)
    assert section_kind(section) == "keyed-state" and files == []
    assert not _fs.exists(job.shared)


def test_changelog_to_canonical_and_the_rocksdb_backend(tmp_path: Path) -> None:
    pytest.importorskip("rocksdict")
    from barrierflow.state.rocksdb_backend import RocksDBKeyedStateBackend

    job, b = Job(tmp_path), backend()
    maps = b.get_map_state(MapStateDescriptor("m"))
    for i in range(300):
        put(b, i, str(i))
        maps.put_all({j: j for j in range(10)})
    job.checkpoint(b, 1)
    put(b, 7, "seven")
    maps.put(3, "patched")
    maps.remove(4)
    b.set_current_key(8)
    b.get_value_state(VALUE).clear()
    section, files = job.checkpoint(b, 2)
    assert map_changes(job, b, files, "m")[1] == {7: ({3: "patched"}, {4})}
    canonical = changelog_to_canonical(section, job.chk(2))
    plain = backend(changelog=False)
    plain.restore([canonical])
    assert state_of(plain) == state_of(b)
    rocks = RocksDBKeyedStateBackend(
        KeyGroupRange(0, MAX_P - 1), MAX_P, EmbeddedRocksDBStateBackend(), str(tmp_path / "db")
    )
    try:
        rocks.restore([section], job.chk(2))
        back = backend(changelog=False)
        back.restore([canonical_bytes(rocks)])
        assert state_of(back) == state_of(b)
    finally:
        rocks.dispose()


def test_damaged_chain_is_a_clear_restore_error(tmp_path: Path) -> None:
    from barrierflow.errors import StateRestoreError

    job = Job(tmp_path)
    section, name, _ = a_base_and_one_delta(job)
    _fs.delete_file(job.file(name))
    with pytest.raises(StateRestoreError, match=r"heap-changelog file .* cannot be read"):
        backend().restore([section], job.chk(2))
    assert read_manifest(section)["deltas"][0][0] == name


def test_one_percent_changed_uploads_under_five_percent(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    keys = 200_000
    for i in range(keys):
        put(b, i, i)
    _, files = job.checkpoint(b, 1)
    full = files[0][1]
    for i in range(0, keys, 100):  # 1 % of the keys
        put(b, i, -i)
    section, files = job.checkpoint(b, 2)
    uploaded = len(section) + sum(size for _, size, new in files if new)
    assert uploaded < 0.05 * full, (uploaded, full)
    print(f"full {full} B, after 1 % changed {uploaded} B ({uploaded / full:.2%})")


def test_the_factory_carries_the_setting() -> None:
    from barrierflow.core.state_backends import HashMapStateBackend
    from barrierflow.state.backends import create_keyed_backend

    rng = KeyGroupRange(0, MAX_P - 1)
    on = create_keyed_backend(HashMapStateBackend(), rng, MAX_P, changelog=True)
    off = create_keyed_backend(HashMapStateBackend(), rng, MAX_P)
    assert isinstance(on, HeapKeyedStateBackend) and on._changelog is not None
    assert isinstance(off, HeapKeyedStateBackend) and off._changelog is None


def test_the_environments_setting_reaches_the_keyed_operators_backend(tmp_path: Path) -> None:
    from barrierflow import StreamExecutionEnvironment
    from barrierflow._clock import SYSTEM_CLOCK
    from barrierflow.api.environment import JobDefined
    from barrierflow.api.job_file import command_line_settings
    from barrierflow.graph.deployment import build_task_descriptors
    from barrierflow.runtime.chain_outputs import CollectingOutput
    from barrierflow.runtime.mailbox_executor import NO_MAILBOX
    from barrierflow.runtime.operator_chain import operator_context
    from barrierflow.runtime.operators.keyed import KeyedOperator

    env = StreamExecutionEnvironment.get_execution_environment()
    assert not env.is_changelog_state_backend_enabled(), "off by default, as in Flink"
    env.set_parallelism(2).enable_changelog_state_backend(True)
    (
        env.from_collection(["a", "b"])
        .key_by(lambda word: word)
        .reduce(lambda a, b: a)
        .uid("count")
        .print()
    )
    defined: list[Any] = []
    capture = command_line_settings(define_only=lambda *job: defined.append(job))
    with capture, pytest.raises(JobDefined):
        env.execute("changelog-plumbing")
    graph, settings = defined[0]
    assert settings.changelog_state_backend
    task_settings = settings.task_settings(
        "job", 1, "run1-1", b"secret", ("127.0.0.1", 1), None, str(tmp_path / "chk"), ()
    )
    assert task_settings.changelog_state_backend
    backends = []
    for descriptor in build_task_descriptors(graph).values():
        context = operator_context(descriptor, task_settings, SYSTEM_CLOCK, NO_MAILBOX)
        for operator in (op.make() for op in descriptor.operators):
            if isinstance(operator, KeyedOperator):
                operator.setup(context, CollectingOutput())
                operator.initialize_state(None)
                backends.append(operator.backend)
    assert len(backends) == 2
    assert all(b._changelog is not None for b in backends)  # type: ignore[attr-defined]


def test_a_delta_holds_the_barriers_values_while_records_keep_changing_them(
    tmp_path: Path,
) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(200):  # a base larger than the deltas
        put(b, i, i)
    values = b.get_value_state(VALUE)
    b.set_current_key("x")
    values.update({"n": 1})
    job.checkpoint(b, 1)
    values.value()["n"] = 2
    snapshot = b.snapshot(2)  # in flight while the value changes in place, and a key goes
    values.value()["n"] = 3
    put(b, "y", 9)
    b.set_current_key("x")
    values.clear()
    chk = job.chk(2)
    _fs.make_dirs(chk)
    snapshot.write(chk.child("side"), job.shared)
    files = snapshot.shared_files()
    snapshot.release()
    b.notify_checkpoint_complete(2)
    assert changed_keys(job.delta(files)) == ({"x": {"n": 2}}, set())
    _, files = job.checkpoint(b, 3)
    assert changed_keys(job.delta(files)) == ({"y": 9}, {"x"})


def test_a_delta_holds_only_the_values_it_writes_and_a_savepoint_all(tmp_path: Path) -> None:
    """A checkpoint certain to be a delta copies on access only the values its delta writes
    and holds no key group it writes nothing of; a savepoint taken meanwhile holds every
    value; a snapshot after a restore (its write may be a base) holds every value too."""
    from barrierflow.state.key_groups import stable_hash

    job, b = Job(tmp_path), backend()
    values = b.get_value_state(VALUE)
    for i in range(200):
        put(b, i, [i])
    job.checkpoint(b, 1)
    b.set_current_key(5)
    values.value().append(50)  # dirty: in the next delta
    by_group: dict[int, list[int]] = {}
    for i in range(200):
        by_group.setdefault(stable_hash(i) % MAX_P, []).append(i)
    untouched = next(keys[0] for group, keys in by_group.items() if group != stable_hash(5) % MAX_P)
    live_untouched = b._tables["v"].live[stable_hash(untouched) % MAX_P][untouched]
    delta = b.snapshot(2)
    assert delta.delta_only
    table, quiet, busy = b._tables["v"], stable_hash(untouched) % MAX_P, stable_hash(5) % MAX_P
    dicts = table.live[quiet], table.live[busy]
    b.set_current_key(untouched)
    assert values.value() is live_untouched, "not copied: the delta does not write it"
    values.update(live_untouched)
    assert table.live[quiet] is dicts[0], "a key group it writes nothing of is not held"
    b.set_current_key(5)
    values.value().append(51)  # a copy: the delta writes the barrier's [5, 50]
    assert table.live[busy] is not dicts[1]
    savepoint = b.snapshot(3, savepoint=True)
    assert not savepoint.delta_only
    expected = state_of(b)
    for i in range(200):
        b.set_current_key(i)
        values.value().append(-1)  # every value held by the savepoint: copied
    assert section_kind(savepoint.write(None)) == "keyed-state"
    restored = backend(changelog=False)
    restored.restore([savepoint.write(None)])
    assert state_of(restored) == expected
    savepoint.release()
    chk = job.chk(2)
    _fs.make_dirs(chk)
    delta.write(chk.child("side"), job.shared)
    with pytest.raises(RuntimeError, match="cannot be written whole"):
        delta.write(None)
    files = delta.shared_files()
    delta.release()
    assert changed_keys(job.delta(files)) == ({5: [5, 50]}, set())
    b.notify_checkpoint_complete(2)
    moved = backend()
    section, _ = job.checkpoint(b, 4)
    moved.restore([section], job.chk(4))
    assert not moved.snapshot(5).delta_only, "after a restore the next write may be a base"


def test_every_write_after_a_copy_on_write_copy_is_recorded(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(3000):
        put(b, i, i)
    job.checkpoint(b, 1)
    held = b.snapshot(2)  # in flight: the first write to each key group copies its dict
    for i in range(0, 3000, 10):  # many writes per key group after that copy
        put(b, i, -i)
    chk = job.chk(2)
    _fs.make_dirs(chk)
    section = held.write(chk.child("side"), job.shared)
    held.release()
    b.notify_checkpoint_complete(2)
    _fs.write_bytes(chk.child("keyed"), section)
    for i in range(1, 3000, 10):
        put(b, i, -i)
    section, files = job.checkpoint(b, 3)
    assert changed_keys(job.delta(files))[0] == {i: -i for i in range(0, 3000, 10)} | {
        i: -i for i in range(1, 3000, 10)
    }
    restored = backend()
    restored.restore([section], job.chk(3))
    assert state_of(restored) == state_of(b)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_with_snapshots_in_flight_restore_every_completed_checkpoint(
    tmp_path: Path, seed: int
) -> None:
    """Value, list and map writes, clears and in-place changes (of values and of map
    entries, which deltas hold entry by entry) interleaved with snapshots held across
    writes, written late, some never completed: every completed checkpoint's chain
    restores exactly the state at its barrier."""
    import random

    rng = random.Random(seed)
    job, b = Job(tmp_path), backend()
    values, lists = b.get_value_state(VALUE), b.get_list_state(ListStateDescriptor("l"))
    maps = b.get_map_state(MapStateDescriptor("m"))
    for i in range(400):
        put(b, i, i)
    in_flight: list[tuple[int, Any, dict[str, dict[Any, Any]]]] = []
    for checkpoint_id in range(1, 40):
        for _ in range(rng.randrange(0, 300)):
            b.set_current_key(rng.randrange(500))
            op = rng.randrange(11)
            if op == 0:
                values.update(rng.randrange(10**6))
            elif op == 1:
                values.clear()
            elif op == 2:
                lists.add(rng.randrange(100))
            elif op == 3:
                lists.clear()
            elif op == 4:
                maps.put(rng.randrange(5), rng.randrange(100))
            elif op == 5:
                maps.remove(rng.randrange(5))
            elif op == 6:
                maps.put_all({rng.randrange(5): [rng.randrange(9)] for _ in range(2)})
            elif op == 7:
                got = maps.get(rng.randrange(5))
                if isinstance(got, list):
                    got.append(rng.randrange(9))  # a map's value changed in place
            elif op == 8:
                maps.clear() if rng.random() < 0.5 else maps.items()
            else:
                current = values.value()
                values.update([current] if not isinstance(current, list) else current)
                got = values.value()
                got.append(rng.randrange(9))  # in place, without update()
        savepoint = rng.random() < 0.15  # written whole while deltas are in flight
        snapshot = b.snapshot(checkpoint_id, savepoint=savepoint)
        in_flight.append((checkpoint_id, snapshot, state_of(b)))
        while in_flight and (len(in_flight) > 2 or rng.random() < 0.5):
            done_id, snapshot, expected = in_flight.pop(0)
            chk = job.chk(done_id)
            _fs.make_dirs(chk)
            whole = not snapshot.delta_only and rng.random() < 0.5
            section = snapshot.write(None if whole else chk.child("side"), job.shared)
            snapshot.release()
            if rng.random() < 0.2:
                continue  # aborted: never completed
            b.notify_checkpoint_complete(done_id)
            restored = backend()
            restored.restore([section], chk)
            assert state_of(restored) == expected, f"checkpoint {done_id}"


def test_a_snapshot_filter_applies_to_deltas(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(100):
        put(b, i, i)
    job.checkpoint(b, 1)
    b.set_snapshot_filter("v", lambda value: None if value % 2 else value * 10)
    for i in range(4):
        put(b, i, i + 100)
    _, files = job.checkpoint(b, 2)
    assert changed_keys(job.delta(files)) == ({0: 1000, 2: 1020}, {1, 3})


# ---- chains event by event: restore from any checkpoint, across a base rewrite --------------

# (event, argument): "put" {key: value or None}; "ckpt" id (completed); "abort" id (written,
# never completed); "late" id (completes only after the next checkpoint's snapshot and
# write, just before that one completes); "rebase" id (a new base, forced by a chain limit
# of no deltas for that one checkpoint).
CHAIN_EVENTS: list[tuple[str, Any]] = [
    ("put", {f"k{i}": i for i in range(60)}),
    ("ckpt", 1),  # base
    ("put", {"k1": 100, "k2": None, "new1": 1}),
    ("ckpt", 2),  # delta 1
    ("put", {"k3": 300, "new1": None, "k2": 2}),
    ("abort", 3),  # its changes must reach the next delta
    ("put", {"k4": 400}),
    ("ckpt", 4),  # delta 2: k3, new1, k2, k4
    ("put", {"k5": 500}),
    ("late", 5),  # snapshot 5, then 6 is taken before 5 completes
    ("put", {"k6": 600, "k5": None}),
    ("ckpt", 6),  # builds on 4's chain (5 had not completed when it was taken): k5, k6
    ("put", {"k8": 800, "k6": None}),
    ("ckpt", 7),  # builds on 6's chain: k8, k6 only
    ("rebase", 8),  # a new base
    ("put", {"k7": 700, "k1": None}),
    ("ckpt", 9),  # a delta over the new base
]


def _chain_run(job: Job, b: HeapKeyedStateBackend) -> dict[int, dict[Any, Any]]:
    """Plays CHAIN_EVENTS on `b`; returns the state (key -> value) at each completed
    checkpoint, and checks each checkpoint's files are the chain it should be."""
    import barrierflow.state.heap_changelog as heap_changelog

    model: dict[Any, Any] = {}
    at: dict[int, dict[Any, Any]] = {}
    late: int | None = None
    late_model: dict[Any, Any] = {}
    for event, argument in CHAIN_EVENTS:
        if event == "put":
            for key, value in argument.items():
                put(b, key, value)
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            continue
        if event == "rebase":
            limit, heap_changelog.MAX_DELTAS = heap_changelog.MAX_DELTAS, 0
            try:
                _, files = job.checkpoint(b, argument)
            finally:
                heap_changelog.MAX_DELTAS = limit
            assert [n.endswith(".heapbase") for n, _, _ in files] == [True], "a new base alone"
        else:
            _, files = job.checkpoint(b, argument, complete=False)
        if late is not None:
            b.notify_checkpoint_complete(late)
            at[late] = late_model
            late = None
        if event in ("ckpt", "rebase"):
            b.notify_checkpoint_complete(argument)
        if event == "late":
            late, late_model = argument, dict(model)
        elif event in ("ckpt", "rebase"):
            at[argument] = dict(model)
    return at


def _keyed(section_id: int, job: Job, rng: KeyGroupRange) -> dict[Any, Any]:
    restored = backend(rng)
    restored.restore([_fs.read_bytes(job.chk(section_id).child("keyed"))], job.chk(section_id))
    return state_of(restored).get("v", {})


def test_a_chain_restores_every_completed_checkpoint_also_rescaled(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    at = _chain_run(job, b)
    assert sorted(at) == [1, 2, 4, 5, 6, 7, 8, 9]
    thirds = [KeyGroupRange(0, 42), KeyGroupRange(43, 85), KeyGroupRange(86, 127)]
    for checkpoint_id, expected in at.items():
        assert _keyed(checkpoint_id, job, KeyGroupRange(0, MAX_P - 1)) == expected, checkpoint_id
        merged: dict[Any, Any] = {}
        for rng in thirds:  # 1 -> 3: each restores only its key groups of the chain
            part = _keyed(checkpoint_id, job, rng)
            assert all(key_in(backend(rng), key) for key in part)
            merged.update(part)
        assert merged == expected, f"rescaled restore of checkpoint {checkpoint_id}"
    manifest = read_manifest(_fs.read_bytes(job.chk(6).child("keyed")))
    deltas4 = read_manifest(_fs.read_bytes(job.chk(4).child("keyed")))["deltas"]
    assert manifest["deltas"][: len(deltas4)] == deltas4, "6 continues 4's chain"
    assert len(manifest["deltas"]) == len(deltas4) + 1, "not 5's (it completed after 6 began)"
    deltas7 = read_manifest(_fs.read_bytes(job.chk(7).child("keyed")))["deltas"]
    assert deltas7[:-1] == manifest["deltas"], "7 continues 6's chain"
    seven = job.file(deltas7[-1][0])
    assert changed_keys(job.delta([(deltas7[-1][0], 0, True)]))[0] == {"k8": 800}, seven


def test_restoring_the_middle_of_a_chain_continues_from_there(tmp_path: Path) -> None:
    job, b = Job(tmp_path), backend()
    at = _chain_run(job, b)
    # restore checkpoint 4 (base + 2 deltas) into a new attempt of the same job folder
    again = backend()
    again.restore([_fs.read_bytes(job.chk(4).child("keyed"))], job.chk(4))
    assert state_of(again)["v"] == at[4]
    put(again, "k1", -1)
    _, files = job.checkpoint(again, 20)
    chain4 = read_manifest(_fs.read_bytes(job.chk(4).child("keyed")))
    assert [n for n, _, _ in files][:-1] == [chain4["base"][0]] + [d[0] for d in chain4["deltas"]]
    assert [new for _, _, new in files] == [False] * (len(files) - 1) + [True]
    assert changed_keys(job.delta(files))[0] == {"k1": -1}, "only what changed since the restore"
    assert _keyed(20, job, KeyGroupRange(0, MAX_P - 1)) == {**at[4], "k1": -1}


def test_a_growing_state_keeps_its_base(tmp_path: Path) -> None:
    """Deltas of new keys over a small first base: the base's size is scaled to the state's
    entries, so the chain goes on (the rule before wrote a base at every checkpoint)."""
    job, b = Job(tmp_path), backend()
    put(b, "k0", 0)
    job.checkpoint(b, 1)
    for checkpoint_id in range(2, 6):
        for i in range(100 * checkpoint_id, 100 * checkpoint_id + 50):
            put(b, f"k{i}", i)
        _, files = job.checkpoint(b, checkpoint_id)
        assert files[-1][0].endswith(".heapdelta"), checkpoint_id
    assert len(files) == 5, "the first base and four deltas"


def test_values_that_grew_since_the_base_keep_the_chain_going(tmp_path: Path) -> None:
    """q19's shape: a base of short values, then a quarter of the keys per checkpoint
    rewritten with values fifty times longer. The deltas are measured against what the
    state has grown to, not the base (the rule before wrote a base after the first delta,
    scaling the base by its entries alone)."""
    job, b = Job(tmp_path), backend()
    for i in range(1000):
        put(b, i, [i])
    _, files = job.checkpoint(b, 1)
    written = 0
    for checkpoint_id in range(2, 40):
        for i in range(250 * (checkpoint_id % 4), 250 * (checkpoint_id % 4 + 1)):
            put(b, i, [i + checkpoint_id] * 50)
        _, files = job.checkpoint(b, checkpoint_id)
        if files[-1][0].endswith(".heapbase"):
            break
        written += files[-1][1]
    assert len(files) == 1, "a new base came"
    full = files[0][1]
    assert written > full, f"only once the deltas ({written} bytes) outgrew the state ({full})"
    assert written < 2 * DELTA_RATIO * full, "and not much later"
    restored = backend()
    restored.restore(
        [_fs.read_bytes(job.chk(checkpoint_id).child("keyed"))], job.chk(checkpoint_id)
    )
    assert state_of(restored) == state_of(b)


def test_a_pending_base_is_not_written_twice_and_an_older_chain_is_not_adopted() -> None:
    log = DirtyLog()
    old = Chain("f", ("shared/b1", 100), (("shared/d1", 150), ("shared/d2", 60)))
    assert old.needs_base("f")
    log.restored(old)
    _, records = log.snapshot(5, {"v": {0: {"a"}}})
    assert base_due(old, records, "f")
    base5 = Chain("f", ("shared/b5", 300))
    records[-1].chain = base5
    confirmed, records = log.snapshot(6, {"v": {0: {"b"}}})
    assert confirmed == old and not base_due(confirmed, records, "f"), "5's base is pending"
    assert base_due(confirmed, records, "g"), "into another job folder: always a base"
    records[-1].chain = Chain("f", old.base, (*old.deltas, ("shared/d6", 10)))
    log.complete(5)
    assert log.confirmed == base5 and [r.checkpoint_id for r in log.pending] == [6]
    log.complete(6)  # a delta on the older base: not adopted, its change stays pending
    assert log.confirmed == base5 and [r.checkpoint_id for r in log.pending] == [6]
    confirmed, records = log.snapshot(7, {"v": {1: {"c"}}})
    assert confirmed == base5 and not base_due(confirmed, records, "f")
    assert union_dirty(records) == {"v": {0: {"b"}, 1: {"c"}}}


def test_while_a_new_base_is_pending_checkpoints_add_deltas_and_every_one_restores(
    tmp_path: Path,
) -> None:
    job, b = Job(tmp_path), backend()
    for i in range(1000):
        put(b, i, i)
    first_base = job.checkpoint(b, 1)[1][0][0]
    checkpoint_id = 1
    while True:  # deltas until one checkpoint writes a new base; it does not complete yet
        checkpoint_id += 1
        for i in range(0, 1000, 3):
            put(b, i, i + checkpoint_id)
        _, files = job.checkpoint(b, checkpoint_id, complete=False)
        if files[-1][0].endswith(".heapbase"):
            break
        b.notify_checkpoint_complete(checkpoint_id)
    pending_base, new_base = checkpoint_id, files[0][0]
    states = {pending_base: state_of(b)}
    for later in (pending_base + 1, pending_base + 2):
        put(b, later, -later)
        _, files = job.checkpoint(b, later, complete=False)
        assert files[0][0] == first_base and files[-1][0].endswith(".heapdelta"), later
        states[later] = state_of(b)
    b.notify_checkpoint_complete(pending_base)
    b.notify_checkpoint_complete(pending_base + 1)  # on the older base: not followed
    put(b, "after", 1)
    _, files = job.checkpoint(b, pending_base + 3)
    assert files[0][0] == new_base and len(files) == 2, "a delta on the new base"
    states[pending_base + 3] = state_of(b)
    for checkpoint_id, expected in states.items():
        restored = backend()
        keyed = _fs.read_bytes(job.chk(checkpoint_id).child("keyed"))
        restored.restore([keyed], job.chk(checkpoint_id))
        assert state_of(restored) == expected, checkpoint_id
