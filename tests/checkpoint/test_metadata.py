"""Checkpoint metadata: built from acks, keyed by uid, restorable at another parallelism."""

from __future__ import annotations

from dataclasses import replace

import pytest

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
from barrierflow._fs import location
from barrierflow.checkpoint.handles import OperatorStateHandle, SubtaskStateHandle
from barrierflow.checkpoint.metadata import (
    build_metadata,
    channel_state_assignment,
    check_compatible,
    is_savepoint,
    restore_assignment,
)
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.errors import StateRestoreError
from barrierflow.state.key_groups import key_group_range_for_subtask


def keyed_job(parallelism: int, max_parallelism: int = 128, count_uid: str = "count"):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism).set_max_parallelism(max_parallelism)
    (
        env.from_source(CollectionSource([1, 2]), WatermarkStrategy.no_watermarks(), "src")
        .uid("src")
        .key_by(lambda x: x)
        .reduce(lambda a, b: a + b)
        .uid(count_uid)
        .sink_to(PrintSink())
        .uid("sink")
    )
    return env.get_job_graph("job")


def acknowledged(graph, vertex_id: int):
    """What every subtask of `vertex_id` acknowledges: one file with keyed state of its range."""
    vertex = graph.vertex(vertex_id)
    handles = {}
    for subtask in vertex.subtasks():
        key_range = key_group_range_for_subtask(128, vertex.parallelism, subtask.subtask_index)
        handles[subtask] = SubtaskStateHandle(
            file=f"state-{subtask.subtask_index}",
            subtask=subtask.subtask_index,
            key_group_range=(key_range.start, key_range.end),
            operators={op.uid: OperatorStateHandle(keyed=(0, 10)) for op in vertex.operators},
        )
    return handles


def test_metadata_lists_each_operators_subtask_files_by_uid():
    graph = keyed_job(2)
    metadata = build_metadata(graph, 7, 1234, False, acknowledged(graph, 1))
    assert metadata["checkpoint_id"] == 7 and metadata["max_parallelism"] == 128
    assert sorted(metadata["operators"]) == ["count", "sink"]
    assert [e["file"] for e in metadata["operators"]["count"]["subtasks"]] == [
        "state-0",
        "state-1",
    ]


def test_rescaling_from_two_to_three_gives_each_subtask_the_files_overlapping_its_key_groups():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    new = keyed_job(3)
    folder = location("/checkpoints/chk-7")
    files = [
        [
            uri.rsplit("/", 1)[1]
            for uri, *_ in restore_assignment(new, metadata, folder, s)["count"].keyed
        ]
        for s in new.vertex(1).subtasks()
    ]
    # old ranges: 0-63, 64-127; new ranges: 0-42, 43-85, 86-127
    assert files == [["state-0"], ["state-0", "state-1"], ["state-1"]]


def test_state_of_an_operator_missing_from_the_job_is_refused_with_its_uid():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    with pytest.raises(StateRestoreError, match="count"):
        check_compatible(keyed_job(2, count_uid="renamed"), metadata, "checkpoint 7")


def test_state_of_a_removed_operator_is_skipped_and_named_when_allowed():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    with pytest.raises(StateRestoreError, match=r"count \(.*--allow-non-restored-state"):
        check_compatible(keyed_job(2, count_uid="renamed"), metadata, "checkpoint 7")
    skipped = check_compatible(
        keyed_job(2, count_uid="renamed"), metadata, "checkpoint 7", allow_non_restored_state=True
    )
    assert skipped == [f"count ({metadata['operators']['count']['name']})"]


def test_another_max_parallelism_is_refused():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    with pytest.raises(StateRestoreError, match="max parallelism 128"):
        check_compatible(keyed_job(2, max_parallelism=64), metadata, "checkpoint 7")


def with_channel_state(handles, subtask_index: int):
    """The handles, with subtask `subtask_index` holding 30 bytes of channel state at 10."""
    return {
        subtask: replace(handle, channel_state=(10, 30))
        if subtask.subtask_index == subtask_index
        else handle
        for subtask, handle in handles.items()
    }


def test_an_unaligned_checkpoint_gives_each_subtask_its_own_channel_state_slice():
    graph = keyed_job(2)
    metadata = build_metadata(graph, 7, 1234, False, with_channel_state(acknowledged(graph, 1), 1))
    folder = location("/checkpoints/chk-7")
    check_compatible(keyed_job(2), metadata, "checkpoint 7")
    first, second = graph.vertex(1).subtasks()
    assert channel_state_assignment(graph, metadata, folder, first) is None
    assert channel_state_assignment(graph, metadata, folder, second) == (
        folder.child("state-1").uri,
        10,
        30,
    )


def test_an_unaligned_checkpoint_with_channel_state_refuses_a_changed_parallelism():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, with_channel_state(acknowledged(old, 1), 0))
    with pytest.raises(StateRestoreError, match="unaligned checkpoint holding in-flight data"):
        check_compatible(keyed_job(3), metadata, "checkpoint 7")


def test_metadata_without_channel_state_still_rescales_and_restores_none():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    assert "channel_state" not in metadata  # as written before unaligned checkpoints existed
    new = keyed_job(3)
    check_compatible(new, metadata, "checkpoint 7")
    folder = location("/checkpoints/chk-7")
    assert channel_state_assignment(new, metadata, folder, new.vertex(1).subtasks()[0]) is None


# ---- savepoints are marked (issue 9, defect 3) ---------------------------------------------------


def test_a_savepoints_metadata_says_it_is_a_savepoint():
    graph = keyed_job(2)

    savepoint = build_metadata(graph, 7, 1234, False, acknowledged(graph, 1), is_savepoint=True)
    checkpoint = build_metadata(graph, 8, 1235, False, acknowledged(graph, 1))

    assert is_savepoint(savepoint) is True
    assert is_savepoint(checkpoint) is False
    assert savepoint["is_savepoint"] is True and checkpoint["is_savepoint"] is False


def test_metadata_written_before_savepoints_were_marked_reads_as_a_checkpoint():
    graph = keyed_job(2)
    old = build_metadata(graph, 7, 1234, False, acknowledged(graph, 1))
    del old["is_savepoint"]

    assert is_savepoint(old) is False
