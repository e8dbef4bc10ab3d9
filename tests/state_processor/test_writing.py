"""Savepoints written from tables restore into jobs of any parallelism, the way the runtime
restores them (metadata's restore assignment, the heap backend, the timer service)."""

from __future__ import annotations

from collections import Counter

import pytest
from snapshot_builder import Operator, Shape, Subtask, Vertex, write_checkpoint
from test_reading import WORDS, NoCallbacks, word_count_checkpoint

from barrierflow import _fs, state_processor
from barrierflow.checkpoint.metadata import check_compatible, restore_assignment
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.runtime.timers import InternalTimerService
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import key_group_range_for_subtask
from barrierflow.state.operator_state import decode_operator_state

PRESET = {"ant": ("ant", 1000), "bee": ("bee", 1000), ("tuple", 1): ("t", 3), 42: ("n", 1)}


def restore(folder, uid: str, parallelism: int, max_parallelism: int = 128):
    """What each of `parallelism` subtasks of a job restores for `uid`: (backend, timers,
    operator states)."""
    snapshot = state_processor.load(folder)
    others = [Vertex(1, [Operator(other, "op")]) for other in snapshot.uids() if other != uid]
    shape = Shape(
        [Vertex(parallelism, [Operator(uid, "op")]), *others], max_parallelism=max_parallelism
    )
    check_compatible(shape, snapshot.metadata, "the savepoint")
    reader = SubtaskStateReader()
    result = []
    for index in range(parallelism):
        assigned = restore_assignment(
            shape, snapshot.metadata, _fs.location(folder), Subtask(0, index)
        )[uid]
        key_groups = key_group_range_for_subtask(max_parallelism, parallelism, index)
        backend = HeapKeyedStateBackend(key_groups, max_parallelism)
        backend.restore([reader.slice(*section) for section in assigned.keyed])
        timers = InternalTimerService(key_groups, max_parallelism, NoCallbacks())
        timers.restore([reader.slice(*section) for section in assigned.timers])
        operator = [
            (old, decode_operator_state(reader.slice(uri, offset, length)))
            for old, uri, offset, length in assigned.operator
        ]
        result.append((backend, timers, operator))
    return result


def restored_values(subtasks, name: str) -> dict:
    values = {}
    for backend, _, _ in subtasks:
        state = backend.get_value_state(ValueStateDescriptor(name))
        for key in list(backend.keys(name)):
            backend.set_current_key(key)
            values[key] = state.value()
    return values


@pytest.mark.parametrize("parallelism", [1, 2, 3, 7])
def test_a_written_value_state_restores_at_any_parallelism(tmp_path, parallelism):
    folder = tmp_path / "savepoint"
    state_processor.SavepointWriter(max_parallelism=128).with_keyed_state(
        "count", "reduce", PRESET, parallelism=2
    ).write(folder)

    assert restored_values(restore(folder, "count", parallelism), "reduce") == PRESET


def test_written_list_and_map_state_restore_as_lists_and_dicts(tmp_path):
    folder = tmp_path / "savepoint"
    (
        state_processor.SavepointWriter()
        .with_keyed_state("op", "seen", [("a", [1, 2]), ("b", [3])], kind="list")
        .with_keyed_state("op", "index", [("a", "x", 1), ("a", "y", 2), ("b", "x", 3)], kind="map")
        .write(folder)
    )
    [(backend, _, _)] = restore(folder, "op", 1)
    seen = backend.get_list_state(ListStateDescriptor("seen"))
    index = backend.get_map_state(MapStateDescriptor("index"))
    backend.set_current_key("a")
    assert (seen.get(), dict(index.items())) == ([1, 2], {"x": 1, "y": 2})
    backend.set_current_key("b")
    assert (seen.get(), dict(index.items())) == ([3], {"x": 3})


def test_a_savepoint_written_is_marked_as_one_and_refuses_to_be_overwritten(tmp_path):
    folder = tmp_path / "savepoint"
    written = state_processor.SavepointWriter().with_keyed_state("op", "v", {1: 2}).write(folder)
    assert written.is_savepoint and written.max_parallelism == 128
    with pytest.raises(ConfigurationError, match="will not overwrite"):
        state_processor.SavepointWriter().write(folder)


def test_modifying_one_state_keeps_every_other_part_of_the_snapshot(tmp_path):
    [backend] = [HeapKeyedStateBackend(key_group_range_for_subtask(128, 1, 0), 128)]
    count = backend.get_value_state(ValueStateDescriptor("count"))
    names = backend.get_list_state(ListStateDescriptor("names"))
    service = InternalTimerService(backend.key_group_range, 128, NoCallbacks())
    for word in WORDS:
        backend.set_current_key(word)
        count.update((count.value() or 0) + 1)
        names.add(word.upper())
        service.register_event_time_timer(word, None, 100)
    original = state_processor.load(
        write_checkpoint(
            tmp_path / "chk-3",
            {
                "counter": [
                    OperatorSnapshot(keyed=canonical_bytes(backend), timers=service.snapshot())
                ],
                "source": [
                    OperatorSnapshot(operator={"split-0": 5}),
                    OperatorSnapshot(operator=None),
                ],
            },
        )
    )
    fixed = {
        e.key: (e.value if e.key != "the" else 0)
        for e in original.keyed_entries("counter", "count")
    }

    written = (
        state_processor.SavepointWriter.from_snapshot(original)
        .with_keyed_state("counter", "count", fixed)
        .write(tmp_path / "fixed")
    )

    assert {e.key: e.value for e in written.keyed_entries("counter", "count")} == {
        **Counter(WORDS),
        "the": 0,
    }
    for read in (
        lambda s: sorted((e.key, e.value) for e in s.keyed_entries("counter", "names")),
        lambda s: sorted((t.key, t.timestamp) for t in s.timer_entries("counter")),
        lambda s: s.operator_state_entries("source"),
    ):
        assert read(written) == read(original)
    assert [(o.uid, o.name) for o in written.operators()] == [
        (o.uid, o.name) for o in original.operators()
    ]
    [(_, timers, _)] = restore(tmp_path / "fixed", "counter", 1)
    assert timers.num_event_time_timers() == len(set(WORDS))


def test_copying_into_another_max_parallelism_re_splits_the_keys(tmp_path):
    original = state_processor.load(word_count_checkpoint(tmp_path / "chk-7"))
    folder = tmp_path / "rescaled"
    state_processor.SavepointWriter(max_parallelism=16).with_operator_of(original, "count").write(
        folder
    )
    restored = restore(folder, "count", 3, max_parallelism=16)
    assert restored_values(restored, "count") == Counter(WORDS)


def test_rows_of_the_wrong_shape_are_refused(tmp_path):
    writer = state_processor.SavepointWriter()
    with pytest.raises(ConfigurationError, match=r"map state rows are \(key, user key, value\)"):
        writer.with_keyed_state("op", "m", [("a", 1)], kind="map")
    with pytest.raises(ConfigurationError, match="kind must be one of"):
        writer.with_keyed_state("op", "m", [], kind="reducing")
