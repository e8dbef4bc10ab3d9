"""One scenario table run against every keyed state backend (issue 22).

Each backend is built as an operator builds it, through `create_keyed_backend`, and used
through the `KeyedStateBackend` protocol only. The table drives one state at a time,
event by event, reading back after every step, with checkpoints and savepoints taken and
restored into a fresh backend in the middle; then the same state goes through
checkpoints at another parallelism (2 -> 3 -> 1, key-group ranges split and merged),
savepoints written by one backend restore into the other, and the errors a mismatch or a
misrouted key must raise. A checkpoint writes its native files (RocksDB) into a real
checkpoint folder and restores them from there, as a task does.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from barrierflow import _fs
from barrierflow.core.state_backends import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StateBackend,
)
from barrierflow.errors import ConfigurationError, StateRestoreError, StreamCorruptionError
from barrierflow.runtime.operators.window import BackendWindowState
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import KeyedStateBackend
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    key_group_range_for_subtask,
)
from barrierflow.window import TimeWindow

MAX_PARALLELISM = 128

BACKENDS = [
    pytest.param(HashMapStateBackend(), id="hashmap"),
    pytest.param(EmbeddedRocksDBStateBackend(), id="rocksdb"),
]

# ---- building, snapshotting, restoring -------------------------------------------------------


class Backends:
    """Makes backends of one kind in a test's folder and disposes them all at the end."""

    def __init__(self, settings: StateBackend, tmp_path: Path) -> None:
        self.settings = settings
        self.tmp_path = tmp_path
        self.made: list[KeyedStateBackend] = []
        self._checkpoints = itertools.count(1)

    def new(
        self, key_group_range: KeyGroupRange | None = None, settings: StateBackend | None = None
    ) -> KeyedStateBackend:
        backend = create_keyed_backend(
            settings or self.settings,
            key_group_range or KeyGroupRange(0, MAX_PARALLELISM - 1),
            MAX_PARALLELISM,
            self.tmp_path / "local",
        )
        self.made.append(backend)
        return backend

    def checkpoint(self, backends: list[KeyedStateBackend]) -> tuple[list[bytes], _fs.Location]:
        """Each backend's keyed section of one checkpoint, its files in the checkpoint's
        folder (as the uploader writes them), and that folder."""
        folder = _fs.location(self.tmp_path / f"chk-{next(self._checkpoints)}")
        _fs.make_dirs(folder)
        sections = []
        for index, backend in enumerate(backends):
            snapshot = backend.snapshot()
            try:
                sections.append(snapshot.write(folder.child(f"subtask-{index}")))
            finally:
                snapshot.release()
        return sections, folder

    def dispose_all(self) -> None:
        for backend in self.made:
            backend.dispose()


@pytest.fixture(params=BACKENDS)
def backends(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made = Backends(request.param, tmp_path)
    yield made
    made.dispose_all()


def savepoint(backend: KeyedStateBackend) -> bytes:
    """The canonical keyed section a savepoint holds."""
    snapshot = backend.snapshot()
    try:
        return snapshot.write(None)
    finally:
        snapshot.release()


# ---- the scenario table: one state, event by event -------------------------------------------

COUNT = ValueStateDescriptor("count")
SEEN = ListStateDescriptor("seen")
LAST = MapStateDescriptor("last")
WINDOW_CONTENTS = "window-contents"
W1 = TimeWindow(0, 10)
W2 = TimeWindow(10, 20)

CHECKPOINT = ("checkpoint",)
"""Take a checkpoint, restore it into a fresh backend and go on with that one."""
SAVEPOINT = ("savepoint",)
"""The same through a savepoint's canonical section."""

# A step is (key, operation, arguments..., expected result after it). Reads are checked
# on every step: the result of the operation itself for a read, else of the read named
# by the row's `read` (see `_read`).
SCENARIOS: dict[str, list[tuple[Any, ...]]] = {
    "value": [
        ("a", "update", 1, 1),
        ("b", "value", None),
        ("a", "update", 2, 2),
        CHECKPOINT,
        ("a", "value", 2),
        ("b", "update", "x", "x"),
        SAVEPOINT,
        ("b", "value", "x"),
        ("a", "update", None, None),  # update(None) clears, as in Flink
        ("b", "clear", None),
        CHECKPOINT,
        ("a", "value", None),
        ("b", "value", None),
        ("a", "update", (1, "t"), (1, "t")),
    ],
    "list": [
        ("a", "add", 1, [1]),
        ("a", "add_all", [2, 3], [1, 2, 3]),
        ("b", "get", []),
        CHECKPOINT,
        ("a", "get", [1, 2, 3]),
        ("b", "update", ["x"], ["x"]),
        ("a", "update", [9], [9]),
        SAVEPOINT,
        ("a", "add", 10, [9, 10]),
        ("b", "get", ["x"]),
        ("a", "update", [], []),  # an empty update clears
        ("b", "clear", []),
        CHECKPOINT,
        ("a", "get", []),
        ("b", "get", []),
    ],
    "map": [
        ("a", "put", "k1", 1, {"k1": 1}),
        ("a", "put_all", {"k2": 2, ("t", 3): [3]}, {"k1": 1, "k2": 2, ("t", 3): [3]}),
        ("b", "put", 7, "seven", {7: "seven"}),
        CHECKPOINT,
        ("a", "get", "k2", 2),
        ("a", "contains", ("t", 3), True),
        ("a", "contains", "k9", False),
        ("a", "remove", "k1", {"k2": 2, ("t", 3): [3]}),
        SAVEPOINT,
        ("a", "get", "k1", None),
        ("b", "is_empty", False),
        ("b", "remove", 7, {}),  # the last entry's removal leaves the key empty
        ("b", "is_empty", True),
        CHECKPOINT,
        ("a", "items", {"k2": 2, ("t", 3): [3]}),
        ("b", "items", {}),
    ],
    "window entries": [
        # As WindowLogic keeps window contents: a map state per name, keyed by the window.
        ("a", "window_put", W1, [1], {W1: [1]}),
        ("a", "window_put", W2, [2], {W1: [1], W2: [2]}),
        ("b", "window_put", W1, 5, {W1: 5}),
        CHECKPOINT,
        ("a", "window_get", W2, [2]),
        ("a", "window_remove", W1, {W2: [2]}),
        SAVEPOINT,
        ("a", "window_get", W1, None),
        ("b", "window_get", W1, 5),
        ("b", "window_remove", W1, {}),
        CHECKPOINT,
        ("a", "items", {W2: [2]}),
        ("b", "items", {}),
    ],
}

_READS = {"value": "value", "list": "get", "map": "items", "window entries": "items"}
"""What is read back after a step that writes, per scenario."""


def _handle(backend: KeyedStateBackend, scenario: str) -> Any:
    if scenario == "value":
        return backend.get_value_state(COUNT)
    if scenario == "list":
        return backend.get_list_state(SEEN)
    if scenario == "map":
        return backend.get_map_state(LAST)
    return backend.get_map_state(MapStateDescriptor(WINDOW_CONTENTS))


def _run_step(backend: KeyedStateBackend, scenario: str, step: tuple[Any, ...]) -> Any:
    """Apply one step to `backend`; its result (a read), or the state read back."""
    key, operation, *arguments = step[:-1]
    backend.set_current_key(key)
    handle = _handle(backend, scenario)
    if operation.startswith("window_"):
        windows = BackendWindowState(backend)
        action = operation.removeprefix("window_")
        result = getattr(windows, action)(WINDOW_CONTENTS, key, *arguments)
        if action == "get":
            return result
        backend.set_current_key(key)
        return dict(handle.items())
    result = getattr(handle, operation)(*arguments)
    if operation in ("value", "get", "contains", "is_empty"):
        return result
    if operation == "items":
        return dict(result)
    read = getattr(handle, _READS[scenario])()
    return dict(read) if scenario in ("map", "window entries") else read


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_state_type_reads_back_what_was_written_through_checkpoints_and_savepoints(
    backends: Backends, scenario: str
) -> None:
    backend = backends.new()
    for number, step in enumerate(SCENARIOS[scenario]):
        if step == CHECKPOINT:
            sections, folder = backends.checkpoint([backend])
            backend = backends.new()
            backend.restore(sections, folder)
            continue
        if step == SAVEPOINT:
            data = savepoint(backend)
            backend = backends.new()
            backend.restore([data])
            continue
        assert _run_step(backend, scenario, step) == step[-1], f"step {number}: {step}"


def test_a_snapshot_holds_the_state_at_the_barrier_whatever_happens_before_it_is_written(
    backends: Backends,
) -> None:
    backend = backends.new()
    count, seen, last = (
        backend.get_value_state(COUNT),
        backend.get_list_state(SEEN),
        backend.get_map_state(LAST),
    )
    for key in ("a", "b"):
        backend.set_current_key(key)
        count.update(1)
        seen.add(1)
        last.put("k", 1)
    snapshot = backend.snapshot()
    # after the barrier, before the uploader writes: change, add, clear
    backend.set_current_key("a")
    count.update(2)
    seen.add(2)
    last.put("k", 2)
    backend.set_current_key("b")
    count.clear()
    seen.clear()
    last.clear()
    backend.set_current_key("c")
    count.update(3)
    try:
        data = snapshot.write(None)
    finally:
        snapshot.release()
    restored = backends.new()
    restored.restore([data])
    assert contents(restored) == {
        "count": {"a": 1, "b": 1},
        "seen": {"a": [1], "b": [1]},
        "last": {"a": {"k": 1}, "b": {"k": 1}},
    }
    assert contents(backend) == {
        "count": {"a": 2, "c": 3},
        "seen": {"a": [1, 2]},
        "last": {"a": {"k": 2}},
    }


# ---- rescaling and switching backends -------------------------------------------------------

KEYS = [f"user-{i}" for i in range(300)] + list(range(100)) + [("tuple", i) for i in range(50)]


def fill(backends_by_subtask: list[KeyedStateBackend], parallelism: int) -> dict[str, Any]:
    """Write every state type for every key of KEYS into the subtask owning its key group;
    returns what the states then hold, as `contents` reads them."""
    expected: dict[str, Any] = {"count": {}, "seen": {}, "last": {}, WINDOW_CONTENTS: {}}
    for index, key in enumerate(KEYS):
        backend = backends_by_subtask[owner(key, parallelism)]
        backend.set_current_key(key)
        backend.get_value_state(COUNT).update(index)
        backend.get_list_state(SEEN).add_all([index, str(index)])
        backend.get_map_state(LAST).put_all({"i": index, index % 7: (index,)})
        BackendWindowState(backend).put(WINDOW_CONTENTS, key, TimeWindow(index, index + 5), [key])
        expected["count"][key] = index
        expected["seen"][key] = [index, str(index)]
        expected["last"][key] = {"i": index, index % 7: (index,)}
        expected[WINDOW_CONTENTS][key] = {TimeWindow(index, index + 5): [key]}
    return expected


def owner(key: Any, parallelism: int) -> int:
    group = assign_to_key_group(key, MAX_PARALLELISM)
    return next(
        i
        for i in range(parallelism)
        if group in key_group_range_for_subtask(MAX_PARALLELISM, parallelism, i)
    )


def contents(backend: KeyedStateBackend) -> dict[str, Any]:
    """Every state's entries per key, read through the protocol (empty states left out)."""
    found: dict[str, Any] = {}
    handles = {
        "count": (backend.get_value_state(COUNT), lambda s: s.value()),
        "seen": (backend.get_list_state(SEEN), lambda s: s.get()),
        "last": (backend.get_map_state(LAST), lambda s: dict(s.items())),
        WINDOW_CONTENTS: (
            backend.get_map_state(MapStateDescriptor(WINDOW_CONTENTS)),
            lambda s: dict(s.items()),
        ),
    }
    for name, (handle, read) in handles.items():
        for key in list(backend.keys(name)):
            backend.set_current_key(key)
            found.setdefault(name, {})[key] = read(handle)
    return found


def merged(parts: list[dict[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for part in parts:
        for name, entries in part.items():
            overlap = set(result.get(name, {})) & set(entries)
            assert not overlap, f"keys of {name} in two subtasks: {sorted(map(str, overlap))[:5]}"
            result.setdefault(name, {}).update(entries)
    return result


def at_parallelism(backends: Backends, parallelism: int, **kwargs: Any) -> list[Any]:
    return [
        backends.new(key_group_range_for_subtask(MAX_PARALLELISM, parallelism, i), **kwargs)
        for i in range(parallelism)
    ]


def test_checkpoints_restore_at_another_parallelism_2_to_3_to_1(backends: Backends) -> None:
    two = at_parallelism(backends, 2)
    expected = fill(two, 2)
    sections, folder = backends.checkpoint(two)

    three = at_parallelism(backends, 3)
    for backend in three:
        backend.restore(sections, folder)  # each takes its own key groups, skips the rest
    parts = [contents(backend) for backend in three]
    assert merged(parts) == expected
    for index, part in enumerate(parts):
        assert all(owner(key, 3) == index for key in part["count"]), index
    # go on at parallelism 3, then merge the three ranges into one
    for backend in three:
        for key in list(backend.keys("count")):
            backend.set_current_key(key)
            state = backend.get_value_state(COUNT)
            state.update(state.value() + 1000)
    expected["count"] = {key: value + 1000 for key, value in expected["count"].items()}
    sections, folder = backends.checkpoint(three)

    (one,) = at_parallelism(backends, 1)
    one.restore(sections, folder)
    assert contents(one) == expected


SWITCHES = [
    pytest.param(HashMapStateBackend(), EmbeddedRocksDBStateBackend(), id="hashmap-to-rocksdb"),
    pytest.param(EmbeddedRocksDBStateBackend(), HashMapStateBackend(), id="rocksdb-to-hashmap"),
]


@pytest.mark.parametrize(("writer", "reader"), SWITCHES)
def test_a_savepoint_of_one_backend_restores_into_the_other_at_another_parallelism(
    tmp_path: Path, writer: StateBackend, reader: StateBackend
) -> None:
    made = Backends(writer, tmp_path)
    try:
        two = at_parallelism(made, 2)
        expected = fill(two, 2)
        savepoints = [savepoint(backend) for backend in two]
        three = at_parallelism(made, 3, settings=reader)
        for backend in three:
            backend.restore(savepoints)
        assert merged([contents(backend) for backend in three]) == expected
        # and the switched job's own savepoint is the canonical format too: back again
        (one,) = at_parallelism(made, 1)
        one.restore([savepoint(backend) for backend in three])
        assert contents(one) == expected
    finally:
        made.dispose_all()


@pytest.mark.parametrize(("writer", "reader"), SWITCHES)
def test_a_checkpoint_of_one_backend_restores_into_the_other_at_another_parallelism(
    tmp_path: Path, writer: StateBackend, reader: StateBackend
) -> None:
    made = Backends(writer, tmp_path)
    try:
        two = at_parallelism(made, 2)
        expected = fill(two, 2)
        sections, folder = made.checkpoint(two)  # RocksDB: its native files in the folder
        three = at_parallelism(made, 3, settings=reader)
        for backend in three:
            backend.restore(sections, folder)
        assert merged([contents(backend) for backend in three]) == expected
    finally:
        made.dispose_all()


# ---- errors -------------------------------------------------------------------------------


def test_a_state_restored_as_another_kind_is_a_restore_error_naming_both(
    backends: Backends,
) -> None:
    backend = backends.new()
    backend.set_current_key("a")
    backend.get_value_state(ValueStateDescriptor("total")).update(1)
    for sections, base in (backends.checkpoint([backend]), ([savepoint(backend)], None)):
        restored = backends.new()
        restored.restore(sections, base)
        with pytest.raises(StateRestoreError, match=r"'total' as value state.*as list state"):
            restored.get_list_state(ListStateDescriptor("total"))


def test_one_name_for_two_kinds_of_state_is_a_configuration_error(backends: Backends) -> None:
    backend = backends.new()
    backend.get_map_state(MapStateDescriptor("total"))
    with pytest.raises(ConfigurationError, match="'total' is map state; it cannot also be value"):
        backend.get_value_state(ValueStateDescriptor("total"))


def test_a_key_outside_the_backends_key_groups_is_stream_corruption(backends: Backends) -> None:
    backend = backends.new(key_group_range_for_subtask(MAX_PARALLELISM, 2, 0))
    foreign = next(key for key in KEYS if owner(key, 2) == 1)
    with pytest.raises(StreamCorruptionError, match="outside this subtask's key groups"):
        backend.set_current_key(foreign)


def test_another_max_parallelism_or_a_key_group_in_two_sections_is_refused(
    backends: Backends,
) -> None:
    backend = backends.new()
    backend.set_current_key("a")
    backend.get_value_state(COUNT).update(1)
    data = savepoint(backend)
    other = create_keyed_backend(
        backends.settings, KeyGroupRange(0, 63), 64, backends.tmp_path / "local"
    )
    backends.made.append(other)
    with pytest.raises(StateRestoreError, match="max parallelism 128"):
        other.restore([data])
    twice = backends.new()
    with pytest.raises(StateRestoreError, match=r"key group .* in two"):
        twice.restore([data, data])


def test_disposing_deletes_the_backends_local_files(backends: Backends) -> None:
    backend = backends.new()
    backend.set_current_key("a")
    backend.get_value_state(COUNT).update(1)
    backend.dispose()
    leftovers = [p for p in (backends.tmp_path / "local").rglob("*") if p.is_file()]
    assert leftovers == []
