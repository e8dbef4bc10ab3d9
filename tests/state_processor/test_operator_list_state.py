"""Operator list state (a CheckpointedFunction's lists) read from snapshots the real
operators wrote, shown by `barrierflow state show`, and written by the SavepointWriter
into savepoints the runtime restores (issue 11, "Reading and writing state")."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from snapshot_builder import Operator, Shape, Subtask, Vertex, write_checkpoint

from barrierflow import _fs, state_processor
from barrierflow.checkpoint.metadata import restore_assignment
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.cli import main
from barrierflow.errors import ConfigurationError
from barrierflow.functions import CheckpointedFunction, KeyedProcessFunction, MapFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.operator_chain import restored_state
from barrierflow.runtime.operators.base import OperatorContext
from barrierflow.runtime.operators.keyed import KeyedProcessOperator
from barrierflow.runtime.operators.stateless import MapOperator
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor
from barrierflow.state.key_groups import (
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)

MAX_P = 128


class Remembering(MapFunction, CheckpointedFunction):
    """Keeps every value it mapped in split list "seen" and its subtask's name in union list
    "owners"; `restored` is what it was given."""

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.seen = store.get_list_state(ListStateDescriptor("seen"))
        self.owners = store.get_union_list_state(ListStateDescriptor("owners"))
        self.restored = {"seen": self.seen.get(), "owners": self.owners.get()}

    def snapshot_state(self, context):
        pass  # the lists are kept up to date as records come

    def map(self, value):
        self.seen.add(value)
        if not self.owners.get():
            self.owners.add(f"owner-{value[0]}")
        return value


class CountsWithOperatorState(KeyedProcessFunction, CheckpointedFunction):
    """Keyed state "count" per key next to an operator list state "total" per subtask."""

    def initialize_state(self, context):
        self.total_state = context.get_operator_state_store().get_list_state(
            ListStateDescriptor("total")
        )
        self.total = sum(self.total_state.get())

    def snapshot_state(self, context):
        self.total_state.update([self.total])

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        self.total += 1


def owner(key, parallelism: int) -> int:
    return subtask_for_key_group(MAX_P, parallelism, assign_to_key_group(key, MAX_P))


def start(operator, index: int, parallelism: int, restored=None):
    context = OperatorContext(
        subtask_index=index,
        parallelism=parallelism,
        max_parallelism=MAX_P,
        key_group_range=key_group_range_for_subtask(MAX_P, parallelism, index),
        attempt=0,
        deployment_id=f"test-{index}",
        processing_time=lambda: 0,
    )
    operator.setup(context, CollectingOutput())
    operator.initialize_state(restored)
    operator.open()
    return operator


def remembering_checkpoint(folder, inputs: list[list[tuple[int, int]]]):
    """A checkpoint of map operator "remember", subtask i having mapped `inputs[i]`."""
    snapshots = []
    for index, values in enumerate(inputs):
        operator = start(MapOperator("remember", "Remember", Remembering()), index, len(inputs))
        operator.process_batch(RecordBatch(values))
        snapshots.append(operator.snapshot_state(3))
    return write_checkpoint(folder, {"remember": snapshots})


INPUTS = [[(0, 1), (0, 2), (0, 3)], [(1, 1)]]


def test_operator_list_state_reads_back_element_by_element_with_its_subtask(tmp_path):
    snapshot = state_processor.load(remembering_checkpoint(tmp_path / "chk-3", INPUTS))

    entries = list(snapshot.operator_list_entries("remember"))
    assert [(e.state_name, e.subtask, e.mode, e.value) for e in entries] == [
        ("seen", 0, "split", (0, 1)),
        ("seen", 0, "split", (0, 2)),
        ("seen", 0, "split", (0, 3)),
        ("owners", 0, "union", "owner-0"),
        ("seen", 1, "split", (1, 1)),
        ("owners", 1, "union", "owner-1"),
    ]
    assert [e.value for e in snapshot.operator_list_entries("remember", "owners")] == [
        "owner-0",
        "owner-1",
    ]
    info = snapshot.operator("remember")
    assert info.list_states == (
        state_processor.ListStateInfo("seen", "split", 4, 2),
        state_processor.ListStateInfo("owners", "union", 2, 2),
    )


def test_a_keyed_function_reads_as_keyed_state_and_operator_list_state(tmp_path):
    snapshots = []
    for index in range(2):
        operator = start(
            KeyedProcessOperator("counts", "Counts", lambda r: r, CountsWithOperatorState()),
            index,
            2,
        )
        operator.process_batch(RecordBatch([k for k in "abacd" if owner(k, 2) == index]))
        snapshots.append(operator.snapshot_state(1))
    snapshot = state_processor.load(write_checkpoint(tmp_path / "chk-1", {"counts": snapshots}))

    totals = [sum(1 for k in "abacd" if owner(k, 2) == index) for index in range(2)]
    assert [(e.subtask, e.value) for e in snapshot.operator_list_entries("counts")] == [
        (0, totals[0]),
        (1, totals[1]),
    ]
    assert sum(e.value for e in snapshot.keyed_entries("counts", "count")) == 5
    assert [s.name for s in snapshot.operator("counts").list_states] == ["total"]


def test_an_operator_state_that_is_not_list_state_has_no_list_states(tmp_path):
    folder = (
        state_processor.SavepointWriter()
        .with_operator_state("source", [{"split-0": 17}])
        .write(tmp_path / "sp")
    )
    assert folder.operator("source").list_states == ()
    assert list(folder.operator_list_entries("source")) == []


def test_state_show_prints_each_list_with_its_mode_and_element_count(tmp_path):
    folder = remembering_checkpoint(tmp_path / "chk-3", INPUTS)
    result = CliRunner().invoke(main, ["state", "show", str(folder), "--sample", "1"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    start_at = lines.index("  operator list state 'seen' (split): 4 element(s) in 2 subtask(s)")
    assert lines[start_at + 1 : start_at + 3] == ["    subtask 0: (0, 1)", "    ... 3 more"]
    assert "  operator list state 'owners' (union): 2 element(s) in 2 subtask(s)" in lines
    assert not any("operator state of subtask" in line for line in lines)


# ---- writing, and the runtime restoring what was written ----------------------------------


def restore_functions(folder, uid: str, parallelism: int) -> list[Remembering]:
    """Map operators of `parallelism` subtasks restored from `folder` as a job restores
    them (restore assignment, state files, operator chain); their functions."""
    snapshot = state_processor.load(folder)
    shape = Shape([Vertex(parallelism, [Operator(uid, "Remember")])], max_parallelism=MAX_P)
    reader = SubtaskStateReader()
    functions = []
    for index in range(parallelism):
        assignment = restore_assignment(
            shape, snapshot.metadata, _fs.location(folder), Subtask(0, index)
        )
        function = Remembering()
        start(
            MapOperator(uid, "Remember", function),
            index,
            parallelism,
            restored_state(reader, assignment.get(uid)),
        )
        functions.append(function)
    return functions


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_written_operator_list_state_restores_split_and_union_at_any_parallelism(
    tmp_path, parallelism
):
    folder = tmp_path / "bootstrap"
    (
        state_processor.SavepointWriter(MAX_P)
        .with_operator_list_state("remember", "seen", [(9, n) for n in range(5)])
        .with_operator_list_state("remember", "owners", {0: ["x"], 1: ["y"]}, mode="union")
        .write(folder)
    )

    functions = restore_functions(folder, "remember", parallelism)
    seen = [f.restored["seen"] for f in functions]
    assert [tuple(v) for part in seen for v in part] == [(9, n) for n in range(5)]
    assert max(map(len, seen)) - min(map(len, seen)) <= 1
    assert all(f.restored["owners"] == ["x", "y"] for f in functions)


def test_a_checkpoint_modified_through_the_writer_restores_the_new_list_and_the_old_ones(
    tmp_path,
):
    taken = remembering_checkpoint(tmp_path / "chk-3", INPUTS)
    folder = tmp_path / "fixed"
    state_processor.SavepointWriter.from_snapshot(taken).with_operator_list_state(
        "remember", "seen", {0: [(5, 5)]}
    ).write(folder)

    written = state_processor.load(folder)
    assert [
        (e.state_name, e.subtask, e.value) for e in written.operator_list_entries("remember")
    ] == [
        ("seen", 0, (5, 5)),
        ("owners", 0, "owner-0"),
        ("owners", 1, "owner-1"),
    ]
    functions = restore_functions(folder, "remember", 2)
    assert [f.restored["seen"] for f in functions] == [[(5, 5)], []]
    assert [f.restored["owners"] for f in functions] == [["owner-0", "owner-1"]] * 2


def test_a_copied_checkpoint_restores_every_subtask_its_own_elements(tmp_path):
    taken = remembering_checkpoint(tmp_path / "chk-3", INPUTS)
    folder = tmp_path / "copy"
    state_processor.SavepointWriter.from_snapshot(taken).write(folder)

    functions = restore_functions(folder, "remember", 2)
    assert [[tuple(v) for v in f.restored["seen"]] for f in functions] == INPUTS


def test_operator_list_state_next_to_other_operator_state_or_of_an_unknown_mode_is_refused(
    tmp_path,
):
    writer = state_processor.SavepointWriter().with_operator_state("source", [{"s": 1}])
    with pytest.raises(ConfigurationError, match="not a function's list state"):
        writer.with_operator_list_state("source", "seen", [1])
    with pytest.raises(ConfigurationError, match='mode must be "split" or "union"'):
        writer.with_operator_list_state("other", "seen", [1], mode="broadcast")
