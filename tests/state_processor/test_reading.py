"""Reading snapshots built event by event by the heap backend, the timer service and the
window logic: the state processor yields exactly what they hold."""

from __future__ import annotations

from collections import Counter

import pytest
from snapshot_builder import write_checkpoint

from barrierflow import _envelope, state_processor
from barrierflow.errors import StateRestoreError
from barrierflow.runtime.operators.base import OperatorSnapshot
from barrierflow.runtime.operators.window import BackendWindowState
from barrierflow.runtime.timers import InternalTimerService
from barrierflow.runtime.windowing import ReducingWindowContents, WindowLogic
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_bytes
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import (
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from barrierflow.window import TimeWindow, TumblingEventTimeWindows

WORDS = ["the", "quick", "fox", "jumps", "over", "the", "lazy", "dog", "the", "fox"]


class NoCallbacks:
    def on_event_time(self, timer):
        raise AssertionError("no timer fires in these tests")

    on_processing_time = on_event_time


def backends(parallelism: int, max_parallelism: int = 128) -> list[HeapKeyedStateBackend]:
    return [
        HeapKeyedStateBackend(
            key_group_range_for_subtask(max_parallelism, parallelism, i), max_parallelism
        )
        for i in range(parallelism)
    ]


def routed(items, parallelism: int, max_parallelism: int = 128):
    """(subtask, item) as the runtime routes each item's key (its first element)."""
    for item in items:
        group = assign_to_key_group(item[0], max_parallelism)
        yield subtask_for_key_group(max_parallelism, parallelism, group), item


def word_count_checkpoint(folder, parallelism: int = 2):
    subtasks = backends(parallelism)
    counts = [b.get_value_state(ValueStateDescriptor("count")) for b in subtasks]
    for subtask, (word,) in routed([(w,) for w in WORDS], parallelism):
        subtasks[subtask].set_current_key(word)
        counts[subtask].update((counts[subtask].value() or 0) + 1)
    return write_checkpoint(
        folder, {"count": [OperatorSnapshot(keyed=canonical_bytes(b)) for b in subtasks]}
    )


def test_value_state_reads_back_as_the_counts_of_the_input(tmp_path):
    snapshot = state_processor.load(word_count_checkpoint(tmp_path / "chk-7"))

    entries = list(snapshot.keyed_entries("count", "count"))
    assert {e.key: e.value for e in entries} == Counter(WORDS)
    assert len(entries) == len(set(WORDS))  # each key once, though two subtasks wrote state
    assert all(e.key_group == assign_to_key_group(e.key, 128) for e in entries)
    assert snapshot.key_count("count", "count") == len(set(WORDS))


def test_operators_list_uid_name_parallelism_states_and_sizes(tmp_path):
    snapshot = state_processor.load(word_count_checkpoint(tmp_path / "chk-7", parallelism=3))

    [info] = snapshot.operators()
    assert (info.uid, info.name, info.parallelism) == ("count", "Op count", 3)
    assert info.states == (state_processor.StateInfo("count", "value"),)
    assert info.keyed_bytes > 0 and info.operator_bytes == 0 and info.timer_bytes == 0
    assert not info.has_operator_state and not info.namespaced
    assert (snapshot.checkpoint_id, snapshot.is_savepoint, snapshot.max_parallelism) == (
        7,
        False,
        128,
    )


def test_the_metadata_file_itself_opens_the_same_snapshot(tmp_path):
    folder = word_count_checkpoint(tmp_path / "chk-7")
    by_file = state_processor.load(folder / "_metadata")
    assert {e.key: e.value for e in by_file.keyed_entries("count", "count")} == Counter(WORDS)


def test_list_and_map_state_read_as_a_list_per_key_and_an_entry_per_map_key(tmp_path):
    [backend] = backends(1)
    seen = backend.get_list_state(ListStateDescriptor("seen"))
    positions = backend.get_map_state(MapStateDescriptor("positions"))
    for index, word in enumerate(WORDS):
        backend.set_current_key(word)
        seen.add(index)
        positions.put(index % 3, index)
    folder = write_checkpoint(
        tmp_path / "chk-1", {"words": [OperatorSnapshot(keyed=canonical_bytes(backend))]}
    )
    snapshot = state_processor.load(folder)

    expected_lists: dict[str, list[int]] = {}
    expected_maps: dict[tuple[str, int], int] = {}
    for index, word in enumerate(WORDS):
        expected_lists.setdefault(word, []).append(index)
        expected_maps[(word, index % 3)] = index
    assert {e.key: e.value for e in snapshot.keyed_entries("words", "seen")} == expected_lists
    assert {
        (e.key, e.user_key): e.value for e in snapshot.keyed_entries("words", "positions")
    } == expected_maps
    assert snapshot.key_count("words", "positions") == len(set(WORDS))
    assert snapshot.values_of_key("words", "fox") == {
        "seen": [2, 9],
        "positions": {2: 2, 0: 9},
    }


def test_timers_read_back_per_domain_with_key_and_namespace(tmp_path):
    services = [
        InternalTimerService(key_group_range_for_subtask(128, 2, i), 128, NoCallbacks())
        for i in range(2)
    ]
    registered = [
        ("a", "event_time", 10, None),
        ("b", "event_time", 20, "w"),
        ("c", "processing_time", 99, None),
    ]
    for subtask, (key, domain, timestamp, namespace) in routed(registered, 2):
        if domain == "event_time":
            services[subtask].register_event_time_timer(key, namespace, timestamp)
        else:
            services[subtask].register_processing_time_timer(key, namespace, timestamp)
    folder = write_checkpoint(
        tmp_path / "chk-1", {"timed": [OperatorSnapshot(timers=s.snapshot()) for s in services]}
    )

    timers = state_processor.load(folder).timer_entries("timed")
    assert sorted((t.key, t.domain, t.timestamp, t.namespace) for t in timers) == registered


def test_window_contents_read_per_key_and_window_with_the_windows_timers(tmp_path):
    [backend] = backends(1)
    service = InternalTimerService(backend.key_group_range, 128, NoCallbacks())
    logic = WindowLogic(
        TumblingEventTimeWindows.of(10),
        ReducingWindowContents(lambda a, b: a + b),
        BackendWindowState(backend),
        service,
    )
    logic.open(None)
    for key, value, timestamp in [("a", 1, 3), ("a", 2, 5), ("b", 4, 12), ("a", 8, 15)]:
        assert logic.process_element(key, value, timestamp, watermark=0) == []
    folder = write_checkpoint(
        tmp_path / "chk-1",
        {"windows": [OperatorSnapshot(keyed=canonical_bytes(backend), timers=service.snapshot())]},
    )
    snapshot = state_processor.load(folder)

    assert snapshot.operator("windows").namespaced
    contents = snapshot.keyed_entries("windows", "window-contents")
    assert {(e.key, e.user_key): e.value for e in contents} == {
        ("a", TimeWindow(0, 10)): 3,
        ("a", TimeWindow(10, 20)): 8,
        ("b", TimeWindow(10, 20)): 4,
    }
    assert sorted((t.key, t.timestamp, t.namespace) for t in snapshot.timer_entries("windows")) == [
        ("a", 9, TimeWindow(0, 10)),
        ("a", 19, TimeWindow(10, 20)),
        ("b", 19, TimeWindow(10, 20)),
    ]


def test_operator_state_reads_per_subtask(tmp_path):
    folder = write_checkpoint(
        tmp_path / "chk-1",
        {
            "source": [
                OperatorSnapshot(operator={"split-0": 120}),
                OperatorSnapshot(operator={"split-1": 7}),
            ]
        },
    )
    assert state_processor.load(folder).operator_state_entries("source") == [
        (0, {"split-0": 120}),
        (1, {"split-1": 7}),
    ]


def test_an_unknown_uid_or_state_names_what_there_is(tmp_path):
    snapshot = state_processor.load(word_count_checkpoint(tmp_path / "chk-7"))
    with pytest.raises(KeyError, match="holds count"):
        snapshot.operator("nope")
    with pytest.raises(KeyError, match="it has count"):
        list(snapshot.keyed_entries("count", "nope"))


def test_a_damaged_state_file_is_an_error_naming_the_file(tmp_path):
    folder = word_count_checkpoint(tmp_path / "chk-7")
    [state_file] = [p for p in folder.iterdir() if p.name.startswith("0-1-")]
    data = bytearray(state_file.read_bytes())
    data[-5] ^= 0xFF
    state_file.write_bytes(bytes(data))

    with pytest.raises(StateRestoreError, match=f"{state_file}.*damaged 'subtask-state'"):
        state_processor.load(folder).operators()


def test_a_snapshot_of_a_newer_format_is_refused_with_the_version(tmp_path):
    folder = word_count_checkpoint(tmp_path / "chk-7")
    metadata = folder / "_metadata"
    data = bytearray(metadata.read_bytes())
    data[4:6] = (_envelope.FORMAT_VERSION + 1).to_bytes(2, "big")
    metadata.write_bytes(bytes(data))

    with pytest.raises(StateRestoreError, match="written by a newer release"):
        state_processor.load(folder)
