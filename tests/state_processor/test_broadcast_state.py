"""Broadcast state (a (Keyed)BroadcastProcessFunction's maps) read from snapshots the real
broadcast operators wrote, shown by `barrierflow state show`, and written by the
SavepointWriter into savepoints the real operators restore (issue 24)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from snapshot_builder import Operator, Shape, Subtask, Vertex, write_checkpoint
from test_operator_list_state import MAX_P, owner, start

from barrierflow import _fs, state_processor
from barrierflow.checkpoint.metadata import restore_assignment
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.cli import main
from barrierflow.errors import ConfigurationError
from barrierflow.functions import (
    BroadcastProcessFunction,
    CheckpointedFunction,
    KeyedBroadcastProcessFunction,
)
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.operator_chain import restored_state
from barrierflow.runtime.operators.broadcast import (
    CoBroadcastProcessOperator,
    KeyedBroadcastProcessOperator,
)
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

RULES = MapStateDescriptor("rules", None, None)
SEEN = MapStateDescriptor("seen", None, None)


class Thresholds(KeyedBroadcastProcessFunction):
    """Broadcast ("name", limit) pairs become rules; each keyed element counts per key in
    keyed state "count" and emits (key, count, the rule for the key or None)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])
        ctx.get_broadcast_state(SEEN).put(value[0], True)

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        yield value, self.count.value(), ctx.get_broadcast_state(RULES).get(value)


class Tagging(BroadcastProcessFunction, CheckpointedFunction):
    """Non-keyed: rules from the broadcast side, and a list "tagged" of what it tagged in
    its operator list state."""

    def initialize_state(self, context):
        self.tagged = context.get_operator_state_store().get_list_state(
            ListStateDescriptor("tagged")
        )

    def snapshot_state(self, context):
        pass

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])

    def process_element(self, value, ctx):
        self.tagged.add(value)
        yield value, ctx.get_broadcast_state(RULES).get(value)


BROADCAST = [("cpu", 90), ("disk", 75), ("cpu", 95)]
KEYS = "abacd"


def keyed_operator(index: int, parallelism: int, restored=None):
    operator = KeyedBroadcastProcessOperator(
        "thresholds", "Thresholds", lambda r: r, Thresholds(), [RULES, SEEN]
    )
    return start(operator, index, parallelism, restored)


def thresholds_checkpoint(folder):
    """Checkpoint 4 of the keyed broadcast operator at parallelism 2: every subtask saw
    every broadcast element, then its share of the keyed ones."""
    snapshots = []
    for index in range(2):
        operator = keyed_operator(index, 2)
        operator.process_batch2(RecordBatch(BROADCAST))
        operator.process_batch1(RecordBatch([k for k in KEYS if owner(k, 2) == index]))
        snapshots.append(operator.snapshot_state(4))
    return write_checkpoint(folder, {"thresholds": snapshots}, checkpoint_id=4)


def test_broadcast_state_reads_back_entry_by_entry_next_to_the_keyed_state(tmp_path):
    snapshot = state_processor.load(thresholds_checkpoint(tmp_path / "chk-4"))

    entries = [(e.state_name, e.key, e.value) for e in snapshot.broadcast_entries("thresholds")]
    assert entries == [
        ("rules", "cpu", 95),
        ("rules", "disk", 75),
        ("seen", "cpu", True),
        ("seen", "disk", True),
    ]
    assert [e.key for e in snapshot.broadcast_entries("thresholds", "seen")] == ["cpu", "disk"]
    info = snapshot.operator("thresholds")
    assert info.broadcast_states == (
        state_processor.BroadcastStateInfo("rules", 2, 2),
        state_processor.BroadcastStateInfo("seen", 2, 2),
    )
    assert info.list_states == ()
    assert sorted((e.key, e.value) for e in snapshot.keyed_entries("thresholds", "count")) == [
        ("a", 2),
        ("b", 1),
        ("c", 1),
        ("d", 1),
    ]


def test_an_unknown_broadcast_state_names_the_ones_there_are(tmp_path):
    snapshot = state_processor.load(thresholds_checkpoint(tmp_path / "chk-4"))
    with pytest.raises(KeyError, match="no broadcast state 'limits'; it has rules, seen"):
        list(snapshot.broadcast_entries("thresholds", "limits"))


def test_state_show_prints_each_broadcast_state_with_its_entries_and_copies(tmp_path):
    folder = thresholds_checkpoint(tmp_path / "chk-4")
    result = CliRunner().invoke(main, ["state", "show", str(folder), "--sample", "1"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    at = lines.index("  broadcast state 'rules': 2 entries, a copy in each of 2 subtask(s)")
    assert lines[at + 1 : at + 3] == ["    'cpu' = 95", "    ... 1 more"]
    assert "  broadcast state 'seen': 2 entries, a copy in each of 2 subtask(s)" in lines
    assert "  keyed state 'count' (value): 4 key(s)" in lines
    assert not any("operator state of subtask" in line for line in lines)


def test_a_non_keyed_broadcast_operator_reads_its_function_s_list_state_too(tmp_path):
    snapshots = []
    for index, values in enumerate([["cpu", "x"], ["disk"]]):
        operator = CoBroadcastProcessOperator("tagging", "Tagging", Tagging(), [RULES])
        start(operator, index, 2)
        operator.process_batch2(RecordBatch(BROADCAST))
        operator.process_batch1(RecordBatch(values))
        snapshots.append(operator.snapshot_state(2))
    snapshot = state_processor.load(write_checkpoint(tmp_path / "chk-2", {"tagging": snapshots}))

    assert [(e.key, e.value) for e in snapshot.broadcast_entries("tagging", "rules")] == [
        ("cpu", 95),
        ("disk", 75),
    ]
    assert [(e.subtask, e.value) for e in snapshot.operator_list_entries("tagging")] == [
        (0, "cpu"),
        (0, "x"),
        (1, "disk"),
    ]
    info = snapshot.operator("tagging")
    assert info.list_states == (state_processor.ListStateInfo("tagged", "split", 3, 2),)
    assert info.broadcast_states == (state_processor.BroadcastStateInfo("rules", 2, 2),)


# ---- writing, and the real operator restoring what was written ----------------------------


def restored_operators(folder, parallelism: int):
    """Keyed broadcast operators of `parallelism` subtasks restored from `folder` as a job
    restores them (restore assignment, state files, operator chain)."""
    snapshot = state_processor.load(folder)
    shape = Shape([Vertex(parallelism, [Operator("thresholds", "T")])], max_parallelism=MAX_P)
    reader = SubtaskStateReader()
    operators = []
    for index in range(parallelism):
        assignment = restore_assignment(
            shape, snapshot.metadata, _fs.location(folder), Subtask(0, index)
        )
        restored = restored_state(reader, assignment.get("thresholds"))
        operators.append(keyed_operator(index, parallelism, restored))
    return operators


def outputs_of(operators, parallelism: int, keys: str) -> list[tuple]:
    out = []
    for index, operator in enumerate(operators):
        operator.process_batch1(RecordBatch([k for k in keys if owner(k, parallelism) == index]))
        out += [event[1] for event in operator.output.take() if event[0] == "record"]
    return sorted(out, key=repr)


@pytest.mark.parametrize("parallelism", [1, 3])
def test_broadcast_state_changed_through_the_writer_is_what_every_restored_subtask_sees(
    tmp_path, parallelism
):
    taken = thresholds_checkpoint(tmp_path / "chk-4")
    folder = tmp_path / "changed"
    written = (
        state_processor.SavepointWriter.from_snapshot(taken)
        .with_broadcast_state("thresholds", "rules", {"a": 1, "cpu": 99})
        .write(folder)
    )
    assert [(e.state_name, e.key, e.value) for e in written.broadcast_entries("thresholds")] == [
        ("rules", "a", 1),
        ("rules", "cpu", 99),
        ("seen", "cpu", True),
        ("seen", "disk", True),
    ]

    operators = restored_operators(folder, parallelism)
    # the rule of "a" is the written one on whichever subtask owns it; the keyed counts
    # came through the copy unchanged
    assert outputs_of(operators, parallelism, "ab") == [("a", 3, 1), ("b", 2, None)]
    for operator in operators:
        assert dict(operator.broadcast_states.read_only_state(RULES).items()) == {
            "a": 1,
            "cpu": 99,
        }
        assert dict(operator.broadcast_states.read_only_state(SEEN).items()) == {
            "cpu": True,
            "disk": True,
        }


def test_a_copied_checkpoint_keeps_broadcast_state_keyed_state_and_list_state(tmp_path):
    taken = thresholds_checkpoint(tmp_path / "chk-4")
    copy = state_processor.SavepointWriter.from_snapshot(taken).write(tmp_path / "copy")
    original = state_processor.load(taken)
    for what in (
        lambda s: list(s.broadcast_entries("thresholds")),
        lambda s: sorted((e.key, e.value) for e in s.keyed_entries("thresholds", "count")),
        lambda s: s.operator("thresholds").broadcast_states,
    ):
        assert what(copy) == what(original)


def test_a_bootstrapped_broadcast_state_from_rows_restores_at_any_parallelism(tmp_path):
    folder = tmp_path / "bootstrap"
    state_processor.SavepointWriter(MAX_P).with_broadcast_state(
        "thresholds", "rules", [("b", 7)], parallelism=2
    ).write(folder)
    for parallelism in (1, 2, 3):
        operators = restored_operators(folder, parallelism)
        assert outputs_of(operators, parallelism, "b") == [("b", 1, 7)]


def test_broadcast_state_next_to_other_operator_state_or_in_bad_rows_is_refused():
    writer = state_processor.SavepointWriter().with_operator_state("source", [{"s": 1}])
    with pytest.raises(ConfigurationError, match="cannot also hold broadcast state"):
        writer.with_broadcast_state("source", "rules", {"a": 1})
    with pytest.raises(ConfigurationError, match=r"broadcast state rows are \(key, value\)"):
        writer.with_broadcast_state("other", "rules", [("a", 1, 2)])
