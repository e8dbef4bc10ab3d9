"""Broadcast state (issue 24 item 13) event by event, no Spark: the broadcast-state
operators driven directly (rules in on the broadcast input, elements on the other),
their snapshots restored at the same and at another parallelism (2 -> 3 -> 1), and the
store's redistribution as a table (new subtask i takes old copy i mod old parallelism)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.clocks import ManualClock
from support.operator_harness import context

from barrierflow import StreamExecutionEnvironment, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import ConfigurationError, JobDefinitionError
from barrierflow.functions import (
    BroadcastProcessFunction,
    CheckpointedFunction,
    KeyedBroadcastProcessFunction,
)
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import OperatorContext, OperatorSnapshot, RestoredState
from barrierflow.runtime.operators.broadcast import (
    CoBroadcastProcessOperator,
    KeyedBroadcastProcessOperator,
)
from barrierflow.runtime.timers import timer_section
from barrierflow.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from barrierflow.state.backend import canonical_section
from barrierflow.state.broadcast_state import BroadcastStateStore
from barrierflow.state.key_groups import (
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from barrierflow.state.operator_state import decode_operator_state, encode_operator_state

MAX_P = 128
RULES = MapStateDescriptor("rules", None, None)
COUNT = ValueStateDescriptor("count")


class Threshold(BroadcastProcessFunction):
    """Rules ("limit", n) on the broadcast side; elements above the limit pass."""

    def process_element(self, value, ctx):
        limit = ctx.get_broadcast_state(RULES).get("limit")
        if limit is not None and value > limit:
            yield (value, ctx.timestamp())

    def process_broadcast_element(self, value, ctx):
        name, limit = value
        ctx.get_broadcast_state(RULES).put(name, limit)
        yield ("rule", name, limit)


class CountAboveLimit(KeyedBroadcastProcessFunction):
    """Counts each key's elements above the limit in keyed state; a timer reports the
    count with the limit then in force; a rule ("reset", _) resets every key's count."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value, ctx):
        _, amount = value
        limit = ctx.get_broadcast_state(RULES).get("limit") or 0
        if amount > limit:
            self.count.update((self.count.value() or 0) + 1)
            ctx.timer_service().register_event_time_timer(100)
        yield (ctx.get_current_key(), self.count.value() or 0)

    def process_broadcast_element(self, value, ctx):
        name, argument = value
        if name == "reset":
            ctx.apply_to_keyed_state(COUNT, lambda key, state: state.update(argument))
        else:
            ctx.get_broadcast_state(RULES).put(name, argument)

    def on_timer(self, timestamp, ctx):
        limit = ctx.get_broadcast_state(RULES).get("limit")
        yield ("timer", ctx.get_current_key(), self.count.value(), limit, ctx.time_domain().name)


def start(operator, index=0, parallelism=1, restored=None):
    output = CollectingOutput()
    context = OperatorContext(
        subtask_index=index,
        parallelism=parallelism,
        max_parallelism=MAX_P,
        key_group_range=key_group_range_for_subtask(MAX_P, parallelism, index),
        attempt=0,
        deployment_id=f"test-{index}",
        processing_time=ManualClock(),
    )
    operator.setup(context, output)
    operator.initialize_state(restored)
    operator.open()
    return output


def records(output):
    return [event[1] for event in output.take() if event[0] == "record"]


def keyed_operator():
    return KeyedBroadcastProcessOperator("kb", "kb", lambda r: r[0], CountAboveLimit(), [RULES])


def handed_to(snapshots: list[OperatorSnapshot], index: int, parallelism: int) -> RestoredState:
    """What the JobMaster hands new subtask `index`: keyed sections overlapping its key
    groups, every old subtask's operator state (through msgpack, as in a state file)."""
    own = key_group_range_for_subtask(MAX_P, parallelism, index)
    restored = RestoredState()
    for old, snapshot in enumerate(snapshots):
        if snapshot.keyed is not None and not isinstance(snapshot.keyed, bytes):
            snapshot = snapshots[old] = replace(snapshot, keyed=canonical_section(snapshot.keyed))
        old_range = key_group_range_for_subtask(MAX_P, len(snapshots), old)
        if snapshot.keyed is not None and len(old_range.intersection(own)):
            restored.keyed.append(snapshot.keyed)
        if snapshot.timers is not None and len(old_range.intersection(own)):
            restored.timers.append(timer_section(snapshot.timers))
        stored = decode_operator_state(encode_operator_state(snapshot.operator))
        restored.operator.append((old, stored))
    return restored


def owner(key, parallelism):
    return subtask_for_key_group(MAX_P, parallelism, assign_to_key_group(key, MAX_P))


# ---- the non-keyed operator -----------------------------------------------------------------


def test_elements_read_the_rules_the_broadcast_side_wrote_before_them():
    operator = CoBroadcastProcessOperator("b", "b", Threshold(), [RULES])
    output = start(operator)
    operator.process_batch1(RecordBatch([5], [1]))
    assert records(output) == []  # no rule yet
    operator.process_batch2(RecordBatch([("limit", 3)], [2]))
    assert records(output) == [("rule", "limit", 3)]
    operator.process_batch1(RecordBatch([2, 4, 9], [3, 4, 5]))
    assert records(output) == [(4, 4), (9, 5)]
    operator.process_batch2(RecordBatch([("limit", 5)]))
    operator.process_batch1(RecordBatch([4, 9], [6, 7]))
    assert records(output) == [("rule", "limit", 5), (9, 7)]


class WritesFromTheWrongSide(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("limit", value)

    def process_broadcast_element(self, value, ctx):
        pass


def test_the_non_broadcast_side_cannot_change_the_broadcast_state():
    operator = CoBroadcastProcessOperator("b", "b", WritesFromTheWrongSide(), [RULES])
    start(operator)
    with pytest.raises(ConfigurationError, match="read-only in process_element"):
        operator.process_batch1(RecordBatch([1]))


class AsksForAnUndeclaredState(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(MapStateDescriptor("other", None, None))

    def process_broadcast_element(self, value, ctx):
        pass


def test_a_broadcast_state_not_given_to_broadcast_is_refused_naming_the_declared_ones():
    operator = CoBroadcastProcessOperator("b", "b", AsksForAnUndeclaredState(), [RULES])
    start(operator)
    with pytest.raises(ConfigurationError, match=r"no broadcast state 'other'.*\['rules'\]"):
        operator.process_batch1(RecordBatch([1]))


# ---- the keyed operator ---------------------------------------------------------------------


def test_keyed_elements_use_keyed_state_timers_and_the_broadcast_rules():
    operator = keyed_operator()
    output = start(operator)
    operator.process_batch2(RecordBatch([("limit", 10)]))
    operator.process_batch1(RecordBatch([("a", 5), ("a", 11), ("b", 12), ("a", 20)], [1] * 4))
    assert records(output) == [("a", 0), ("a", 1), ("b", 1), ("a", 2)]
    operator.process_batch2(RecordBatch([("limit", 15)]))
    operator.process_watermark(Watermark(100))
    assert records(output) == [
        ("timer", "a", 2, 15, "EVENT_TIME"),
        ("timer", "b", 1, 15, "EVENT_TIME"),
    ]


def test_apply_to_keyed_state_reaches_every_key_of_the_subtask():
    operator = keyed_operator()
    output = start(operator)
    operator.process_batch1(RecordBatch([("a", 1), ("b", 1), ("b", 2), ("c", 3)]))
    output.take()
    operator.process_batch2(RecordBatch([("reset", 7)]))
    operator.process_batch1(RecordBatch([("a", 1), ("b", 1), ("c", 1), ("d", 1)]))
    assert records(output) == [("a", 8), ("b", 8), ("c", 8), ("d", 1)]


def test_broadcast_state_keyed_state_and_timers_survive_a_snapshot_and_restore():
    operator = keyed_operator()
    start(operator)
    operator.process_batch2(RecordBatch([("limit", 2)]))
    operator.process_batch1(RecordBatch([("a", 3), ("a", 1)], [1, 1]))
    snapshot = operator.snapshot_state(1)
    again = keyed_operator()
    output = start(again, restored=handed_to([snapshot], 0, 1))
    again.process_batch1(RecordBatch([("a", 3)], [2]))
    again.process_watermark(Watermark(100))
    assert records(output) == [("a", 2), ("timer", "a", 2, 2, "EVENT_TIME")]


def test_every_subtask_keeps_the_rules_and_its_keys_through_rescales_2_3_1():
    keys = [f"k{i}" for i in range(12)]
    operators = [keyed_operator() for _ in range(2)]
    for index, operator in enumerate(operators):
        start(operator, index, 2)
        operator.process_batch2(RecordBatch([("limit", 1)]))  # every subtask sees each rule
    for key in keys:
        operators[owner(key, 2)].process_batch1(RecordBatch([(key, 5)]))
    snapshots = [operator.snapshot_state(1) for operator in operators]
    for step, parallelism in enumerate((3, 1), start=2):
        operators = [keyed_operator() for _ in range(parallelism)]
        outputs = [
            start(operator, index, parallelism, handed_to(snapshots, index, parallelism))
            for index, operator in enumerate(operators)
        ]
        for index, operator in enumerate(operators):
            rules = dict(operator.broadcast_states.read_only_state(RULES).items())
            assert rules == {"limit": 1}, f"subtask {index} of {parallelism}"
        for key in keys:
            # one element above the restored limit (counted), one at it (not counted)
            operators[owner(key, parallelism)].process_batch1(RecordBatch([(key, 5), (key, 1)]))
        emitted = sorted(value for output in outputs for value in records(output))
        assert emitted == sorted([(key, step) for key in keys] * 2)
        snapshots = [operator.snapshot_state(step) for operator in operators]


class BufferedRules(BroadcastProcessFunction, CheckpointedFunction):
    """Keeps an operator list state next to the broadcast state."""

    def process_element(self, value, ctx):
        yield (value, sorted(ctx.get_broadcast_state(RULES).keys()), list(self.seen.get()))

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value, True)
        self.seen.add(value)

    def snapshot_state(self, context):
        pass

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.seen = store.get_list_state(ListStateDescriptor("seen"))


def test_a_checkpointed_function_keeps_its_list_state_beside_the_broadcast_state():
    operator = CoBroadcastProcessOperator("b", "b", BufferedRules(), [RULES])
    start(operator)
    operator.process_batch2(RecordBatch(["x", "y"]))
    snapshot = operator.snapshot_state(1)
    again = CoBroadcastProcessOperator("b", "b", BufferedRules(), [RULES])
    output = start(again, restored=handed_to([snapshot], 0, 1))
    again.process_batch1(RecordBatch([0]))
    assert records(output) == [(0, ["x", "y"], ["x", "y"])]


# ---- the store's redistribution -------------------------------------------------------------


def copies(*limits):
    """Old subtasks' snapshots whose copies differ only to tell which one a subtask took."""
    snapshots = []
    for index, limit in enumerate(limits):
        store = BroadcastStateStore([RULES])
        store.broadcast_state(RULES).put("limit", limit)
        snapshots.append((index, decode_operator_state(encode_operator_state(store.snapshot()))))
    return snapshots


@pytest.mark.parametrize(
    ("old_limits", "new_parallelism", "taken"),
    [
        ((10, 11), 2, [10, 11]),  # unchanged: each its own
        ((10, 11), 3, [10, 11, 10]),  # scale up: round robin over the old copies
        ((10, 11, 12), 1, [10]),  # scale down: the first ones kept
        ((10, 11, 12), 2, [10, 11]),
        ((10,), 4, [10, 10, 10, 10]),
    ],
)
def test_new_subtask_i_takes_old_copy_i_mod_the_old_parallelism(old_limits, new_parallelism, taken):
    snapshots = copies(*old_limits)
    got = [
        BroadcastStateStore.restored([RULES], list(reversed(snapshots)), i)
        .read_only_state(RULES)
        .get("limit")
        for i in range(new_parallelism)
    ]
    assert got == taken


def test_a_snapshot_is_a_copy_later_writes_do_not_reach():
    store = BroadcastStateStore([RULES])
    state = store.broadcast_state(RULES)
    state["limit"] = 1
    snapshot = store.snapshot()
    state["limit"] = 2
    del state["limit"]
    restored = BroadcastStateStore.restored([RULES], [(0, snapshot)], 0)
    assert dict(restored.read_only_state(RULES).items()) == {"limit": 1}


# ---- the API --------------------------------------------------------------------------------


def test_broadcast_without_descriptors_stays_a_partitioning():
    env = StreamExecutionEnvironment.get_execution_environment()
    stream = env.from_collection([1]).broadcast()
    stream.map(lambda v: v).print()
    edges = env.get_job_graph().edges
    assert [edge.partitioner.name for edge in edges] == ["broadcast"]


def test_a_function_of_the_wrong_kind_is_refused_when_the_job_is_built():
    env = StreamExecutionEnvironment.get_execution_environment()
    rules = env.from_collection([("limit", 1)]).broadcast(RULES)
    keyed = env.from_collection([("a", 1)]).key_by(lambda r: r[0])
    with pytest.raises(JobDefinitionError, match="KeyedBroadcastProcessFunction"):
        keyed.connect(rules).process(Threshold())
    with pytest.raises(JobDefinitionError, match="needs a keyed stream"):
        env.from_collection([1]).connect(rules).process(CountAboveLimit())
    with pytest.raises(JobDefinitionError, match="MapStateDescriptor"):
        env.from_collection([1]).broadcast(ValueStateDescriptor("x"))
    with pytest.raises(JobDefinitionError, match="two MapStateDescriptors named 'rules'"):
        env.from_collection([1]).broadcast(RULES, MapStateDescriptor("rules", None, None))


def test_the_output_type_is_checked_when_the_job_is_built():
    from barrierflow import Types

    env = StreamExecutionEnvironment.get_execution_environment()
    rules = env.from_collection([("limit", 1)]).broadcast(RULES)
    stream = env.from_collection([1]).connect(rules).process(Threshold(), output_type=Types.INT())
    assert stream._declared_type == Types.INT()
    with pytest.raises(ConfigurationError, match="declared type"):
        env.from_collection([1]).connect(rules).process(Threshold(), output_type=Types.INT)


def test_on_rocksdb_apply_to_keyed_state_and_a_checkpoint_restore_work_alike(tmp_path):
    def operator(local, restored=None):
        made = keyed_operator()
        settings = replace(
            context(ManualClock()),
            state_backend=EmbeddedRocksDBStateBackend(),
            local_dir=str(local),
        )
        made.setup(settings, CollectingOutput())
        made.initialize_state(restored)
        made.open()
        return made

    first = operator(tmp_path / "local-1")
    first.process_batch2(RecordBatch([("limit", 2)]))
    first.process_batch1(RecordBatch([("a", 3), ("b", 3), ("b", 4)], [1, 1, 1]))
    first.process_batch2(RecordBatch([("reset", 10)]))
    snapshot = first.snapshot_state(1)
    checkpoint = _fs.location(tmp_path / "chk-1")
    try:
        section = snapshot.keyed.write(checkpoint.child("subtask-0.state.files-0"))
    finally:
        snapshot.keyed.release()
    first.abort()
    restored = handed_to([replace(snapshot, keyed=section)], 0, 1)
    restored.base = checkpoint
    second = operator(tmp_path / "local-2", restored)
    second.process_batch1(RecordBatch([("a", 3), ("b", 1), ("c", 5)], [2, 2, 2]))
    assert records(second.output) == [("a", 11), ("b", 10), ("c", 1)]
    second.close()


def test_with_changelog_checkpoints_a_savepoint_between_deltas_holds_all_its_keyed_state(
    tmp_path,
):
    # the savepoint flag reaches the keyed backend: without it a savepoint taken where a
    # delta is due would hold only the delta's keys and could not be written whole
    operator = keyed_operator()
    operator.setup(
        replace(context(ManualClock()), changelog_state_backend=True), CollectingOutput()
    )
    operator.initialize_state(None)
    operator.open()
    shared = _fs.location(tmp_path / "shared")
    for checkpoint_id in (1, 2):  # a base, then a completed chain a delta would follow
        operator.process_batch1(RecordBatch([("a", checkpoint_id)], [1]))
        keyed = operator.snapshot_state(checkpoint_id).keyed
        checkpoint = _fs.location(tmp_path / f"chk-{checkpoint_id}")
        _fs.make_dirs(checkpoint)
        try:
            keyed.write(checkpoint.child("side"), shared)
        finally:
            keyed.release()
        operator.notify_checkpoint_complete(checkpoint_id)
    operator.process_batch1(RecordBatch([("b", 1)], [1]))
    delta = operator.snapshot_state(3).keyed
    assert delta.delta_only, "a checkpoint here is a delta"
    delta.release()
    restored = handed_to([operator.snapshot_state(4, savepoint=True)], 0, 1)
    again = keyed_operator()
    start(again, restored=restored)
    again.process_batch1(RecordBatch([("a", 1), ("b", 1)], [2, 2]))
    assert records(again.output) == [("a", 3), ("b", 2)]
