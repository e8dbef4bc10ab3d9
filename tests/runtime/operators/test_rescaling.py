"""Every kind of state redistributed to another parallelism, event by event (issue 11,
"Rescaling"): old subtasks run and snapshot, new subtasks at 2 -> 3 and 3 -> 1 restore
what the JobMaster would hand them, and together they hold every piece of state exactly
once. No Spark: operators are driven directly, the way `OperatorChain` drives them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace

import pytest
from support.clocks import ManualClock
from support.operator_harness import QueuedMailbox

from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.functions import (
    AsyncFunction,
    CheckpointedFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
)
from barrierflow.runtime.async_io import AsyncWaitSpec, OutputMode
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.elements import MAX_WATERMARK, Watermark
from barrierflow.runtime.mailbox_executor import NO_MAILBOX
from barrierflow.runtime.operators.async_wait import AsyncWaitOperator
from barrierflow.runtime.operators.base import (
    OperatorContext,
    OperatorSnapshot,
    RestoredState,
    StreamOperator,
)
from barrierflow.runtime.operators.keyed import KeyedProcessOperator, KeyedReduceOperator
from barrierflow.runtime.operators.process import ProcessOperator
from barrierflow.runtime.operators.source_sink import SinkOperator, SourceOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator
from barrierflow.runtime.operators.window import WindowOperator
from barrierflow.runtime.timers import timer_section
from barrierflow.state import ListStateDescriptor
from barrierflow.state.backend import canonical_section
from barrierflow.state.key_groups import (
    assign_to_key_group,
    key_group_range_for_subtask,
    subtask_for_key_group,
)
from barrierflow.state.operator_state import decode_operator_state, encode_operator_state
from barrierflow.window import TumblingEventTimeWindows

MAX_P = 128
RESCALES = pytest.mark.parametrize(("old_p", "new_p"), [(2, 3), (3, 1)], ids=["2->3", "3->1"])
KEYS = [f"k{i}" for i in range(16)]


def owner(key: str, parallelism: int) -> int:
    """The subtask whose key groups hold `key`."""
    return subtask_for_key_group(MAX_P, parallelism, assign_to_key_group(key, MAX_P))


def start(
    operator: StreamOperator,
    index: int,
    parallelism: int,
    restored: RestoredState | None = None,
    deployment: str = "old",
    mailbox=NO_MAILBOX,
) -> CollectingOutput:
    """Set up, restore and open `operator` as subtask `index` of `parallelism`."""
    output = CollectingOutput()
    context = OperatorContext(
        subtask_index=index,
        parallelism=parallelism,
        max_parallelism=MAX_P,
        key_group_range=key_group_range_for_subtask(MAX_P, parallelism, index),
        attempt=0,
        deployment_id=f"{deployment}-{index}",
        processing_time=ManualClock(),
        mailbox=mailbox,
    )
    operator.setup(context, output)
    operator.initialize_state(restored)
    operator.open()
    return output


def handed_to(snapshots: list[OperatorSnapshot | None], index: int, parallelism: int):
    """What `restore_assignment` and the chain hand new subtask `index`: the keyed and timer
    snapshots overlapping its key groups, and every old subtask's operator state (through
    the msgpack of a checkpoint file)."""
    own = key_group_range_for_subtask(MAX_P, parallelism, index)
    restored = RestoredState()
    for old, snapshot in enumerate(snapshots):
        if snapshot is None:
            continue
        if snapshot.keyed is not None and not isinstance(snapshot.keyed, bytes):
            # written once, as the uploader writes it, then handed to every new subtask
            snapshot = snapshots[old] = replace(snapshot, keyed=canonical_section(snapshot.keyed))
        old_range = key_group_range_for_subtask(MAX_P, len(snapshots), old)
        overlaps = len(old_range.intersection(own)) > 0
        if snapshot.keyed is not None and overlaps:
            restored.keyed.append(snapshot.keyed)
        if snapshot.timers is not None and overlaps:
            restored.timers.append(timer_section(snapshot.timers))
        if snapshot.operator is not None:
            stored = decode_operator_state(encode_operator_state(snapshot.operator))
            restored.operator.append((old, stored))
    return restored


# ---- keyed state: key groups ----------------------------------------------------------------


def add_counts(a, b):
    return (a[0], a[1] + b[1])


@RESCALES
def test_keyed_state_follows_its_key_groups_to_exactly_one_new_subtask(old_p, new_p):
    snapshots = []
    for index in range(old_p):
        operator = KeyedReduceOperator("count", "count", lambda r: r[0], add_counts)
        start(operator, index, old_p)
        mine = [(key, 1) for key in KEYS if owner(key, old_p) == index]
        operator.process_batch(RecordBatch(mine + mine))
        snapshots.append(operator.snapshot_state(1))

    counts: dict[str, int] = {}
    for index in range(new_p):
        operator = KeyedReduceOperator("count", "count", lambda r: r[0], add_counts)
        output = start(operator, index, new_p, handed_to(snapshots, index, new_p), "new")
        assert operator.backend is not None
        held = sorted(operator.backend.keys("reduce"))
        assert held == sorted(key for key in KEYS if owner(key, new_p) == index)
        operator.process_batch(RecordBatch([(key, 1) for key in held]))
        for key, count in output.records():
            assert key not in counts
            counts[key] = count
    assert counts == dict.fromkeys(KEYS, 3)


# ---- timers -----------------------------------------------------------------------------------


class TimerPerRecord(KeyedProcessFunction):
    """Registers an event-time timer at the record's value; a timer emits (key, time)."""

    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(value[1])

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp


@RESCALES
def test_each_timer_fires_once_in_the_new_subtask_that_owns_its_key(old_p, new_p):
    snapshots = []
    for index in range(old_p):
        operator = KeyedProcessOperator("t", "t", lambda r: r[0], TimerPerRecord())
        start(operator, index, old_p)
        mine = [(key, 100 + n) for n, key in enumerate(KEYS) if owner(key, old_p) == index]
        operator.process_batch(RecordBatch(mine))
        snapshots.append(operator.snapshot_state(1))
        assert snapshots[-1].timers is not None

    fired = []
    for index in range(new_p):
        operator = KeyedProcessOperator("t", "t", lambda r: r[0], TimerPerRecord())
        output = start(operator, index, new_p, handed_to(snapshots, index, new_p), "new")
        operator.process_watermark(Watermark(MAX_WATERMARK))
        for key, timestamp in output.records():
            assert owner(key, new_p) == index
            fired.append((key, timestamp))
    assert sorted(fired) == sorted((key, 100 + n) for n, key in enumerate(KEYS))


# ---- window contents and their timers -----------------------------------------------------------


@RESCALES
def test_window_contents_and_window_timers_rescale_into_the_same_results(old_p, new_p):
    """Each key has two records in window [0, 10) before the checkpoint and one after."""
    snapshots = []
    for index in range(old_p):
        operator = WindowOperator(
            "w", "w", lambda r: r[0], TumblingEventTimeWindows.of(10), ("reduce", add_counts, None)
        )
        start(operator, index, old_p)
        mine = [(key, 1) for key in KEYS if owner(key, old_p) == index]
        operator.process_batch(RecordBatch(mine + mine, [1] * (2 * len(mine))))
        snapshots.append(operator.snapshot_state(1))

    results = []
    for index in range(new_p):
        operator = WindowOperator(
            "w", "w", lambda r: r[0], TumblingEventTimeWindows.of(10), ("reduce", add_counts, None)
        )
        output = start(operator, index, new_p, handed_to(snapshots, index, new_p), "new")
        mine = [(key, 1) for key in KEYS if owner(key, new_p) == index]
        operator.process_batch(RecordBatch(mine, [5] * len(mine)))
        operator.process_watermark(Watermark(9))  # the window's end timer, restored or new
        results += [(value, timestamp) for _, value, timestamp in output.take()[:-1]]
    assert sorted(results) == sorted(((key, 3), 9) for key in KEYS)


# ---- sink transactions --------------------------------------------------------------------------


@RESCALES
def test_every_pre_committed_sink_transaction_is_committed_exactly_once(tmp_path, old_p, new_p):
    """The old subtasks pre-commit at checkpoint 1 and fail before it completes: the new
    subtasks commit each old transaction once, and clear every old staging folder."""
    sink = FileSink(str(tmp_path / "out"))
    sink.prepare()
    snapshots = []
    for index in range(old_p):
        operator = SinkOperator("sink", "sink", sink)
        start(operator, index, old_p)
        operator.process_batch(RecordBatch([f"old-{index}-{n}" for n in range(3)]))
        snapshots.append(operator.snapshot_state(1))
        operator.process_batch(RecordBatch([f"uncommitted-{index}"]))  # open, never part of it
        operator.abort()

    for index in range(new_p):
        operator = SinkOperator("sink", "sink", sink)
        start(operator, index, new_p, handed_to(snapshots, index, new_p), "new")
        operator.snapshot_state(2)
        operator.notify_checkpoint_complete(2)
        operator.close()

    committed = sorted(sink.committed_output())
    assert committed == sorted(f"old-{i}-{n}" for i in range(old_p) for n in range(3))
    staged = [p for p in (tmp_path / "out" / ".staging").rglob("*") if p.is_file()]
    assert staged == []


# ---- source split positions ----------------------------------------------------------------------


def generator_source() -> DataGeneratorSource:
    return DataGeneratorSource(lambda i: i, 24, num_splits=6)


def dealt(p: int, index: int):
    """The splits the JobMaster deals round-robin to source subtask `index` of `p`."""
    return generator_source().create_splits()[index::p]


@RESCALES
def test_every_split_resumes_from_its_position_in_exactly_one_new_subtask(old_p, new_p):
    snapshots, before = [], []
    for index in range(old_p):
        operator = SourceOperator("src", "src", generator_source())
        operator.assign_splits(dealt(old_p, index))
        output = start(operator, index, old_p)
        for _ in range(index + 1):  # the subtasks read unevenly far
            operator.emit_next(2)
        before += output.records()
        snapshots.append(operator.snapshot_state(1))

    after = []
    for index in range(new_p):
        operator = SourceOperator("src", "src", generator_source())
        operator.assign_splits(dealt(new_p, index))
        output = start(operator, index, new_p, handed_to(snapshots, index, new_p), "new")
        while operator.emit_next(5) != SourceOperator.END_OF_INPUT:
            pass
        after += output.records()
    assert sorted(before + after) == list(range(24))


# ---- async I/O: in-flight elements --------------------------------------------------------------


class Held(AsyncFunction):
    """Never completes: every call stays in flight until the checkpoint."""

    def __init__(self) -> None:
        self.release = threading.Event()

    async def async_invoke(self, value):
        await asyncio.get_running_loop().run_in_executor(None, self.release.wait, 30)
        return []


class Immediate(AsyncFunction):
    async def async_invoke(self, value):
        return [f"{value}!"]


def async_operator(function) -> AsyncWaitOperator:
    spec = AsyncWaitSpec.create(function, timeout=0, capacity=10, output_mode=OutputMode.ORDERED)
    return AsyncWaitOperator("a", "a", spec)


def held_async_snapshots(old_p: int, watermarks: bool = False) -> list[OperatorSnapshot | None]:
    """Each old subtask i holds records "i-0", "i-1" in flight (and watermark 90 + i)."""
    snapshots = []
    for index in range(old_p):
        function = Held()
        operator = async_operator(function)
        start(operator, index, old_p, mailbox=QueuedMailbox())
        operator.process_batch(RecordBatch([f"{index}-0", f"{index}-1"], [100, 100]))
        if watermarks:
            operator.process_watermark(Watermark(90 + index))
        snapshots.append(operator.snapshot_state(1))
        function.release.set()
        operator.abort()
    return snapshots


@RESCALES
def test_in_flight_async_elements_are_called_again_by_exactly_one_new_subtask(old_p, new_p):
    snapshots = held_async_snapshots(old_p)
    results = []
    for index in range(new_p):
        mailbox = QueuedMailbox()
        operator = async_operator(Immediate())
        output = start(operator, index, new_p, handed_to(snapshots, index, new_p), "new", mailbox)
        operator.process_watermark(Watermark(MAX_WATERMARK))
        mailbox.run_until(operator.accepts_input)
        results += output.records()
        operator.close()
    expected = [f"{i}-{n}!" for i in range(old_p) for n in range(2)]
    assert sorted(results) == expected


@RESCALES
def test_held_watermarks_of_old_subtasks_are_not_replayed_at_another_parallelism(old_p, new_p):
    """A watermark an old subtask held belongs to that subtask's input; after rescaling a
    new subtask reads other splits (maybe behind it), so replaying it would make their
    records late downstream. The records come back; the watermarks come again from the
    sources."""
    snapshots = held_async_snapshots(old_p, watermarks=True)
    for index in range(new_p):
        mailbox = QueuedMailbox()
        operator = async_operator(Immediate())
        output = start(operator, index, new_p, handed_to(snapshots, index, new_p), "new", mailbox)
        drained = operator.logic
        mailbox.run_until(lambda: drained.is_drained)  # noqa: B023 - called in this iteration
        assert [e for e in output.take() if e[0] == "watermark"] == []
        operator.abort()


def test_held_watermarks_are_replayed_at_the_same_parallelism():
    snapshots = held_async_snapshots(2, watermarks=True)
    for index in range(2):
        mailbox = QueuedMailbox()
        operator = async_operator(Immediate())
        output = start(operator, index, 2, handed_to(snapshots, index, 2), "new", mailbox)
        drained = operator.logic
        mailbox.run_until(lambda: drained.is_drained)  # noqa: B023 - called in this iteration
        assert output.take() == [
            ("record", f"{index}-0!", 100),
            ("record", f"{index}-1!", 100),
            ("watermark", 90 + index),
        ]
        operator.abort()


# ---- operator list state of user functions ------------------------------------------------------


class Remembering(MapFunction, CheckpointedFunction):
    """Keeps what it was told in a split list and a union list; `restored` is what it got."""

    def __init__(self, split=(), union=()):
        self.split, self.union = list(split), list(union)

    def initialize_state(self, context):
        store = context.get_operator_state_store()
        self.split_state = store.get_list_state(ListStateDescriptor("split"))
        self.union_state = store.get_union_list_state(ListStateDescriptor("union"))
        self.was_restored = context.is_restored()
        self.restored = (self.split_state.get(), self.union_state.get())

    def snapshot_state(self, context):
        self.split_state.update(self.split)
        self.union_state.update(self.union)

    def map(self, value):
        return value


def list_state_snapshots(old_p: int, sizes: list[int]) -> list[OperatorSnapshot | None]:
    """Old subtask i holds `sizes[i]` split elements (i, n) and one union element."""
    snapshots = []
    for index in range(old_p):
        function = Remembering([(index, n) for n in range(sizes[index])], [f"u{index}"])
        operator = MapOperator("m", "m", function)
        start(operator, index, old_p)
        assert function.was_restored is False and function.restored == ([], [])
        snapshots.append(operator.snapshot_state(1))
    return snapshots


@pytest.mark.parametrize(
    ("old_p", "sizes", "new_p", "parts"),
    [
        (2, [4, 1], 3, [[(0, 0), (0, 1)], [(0, 2), (0, 3)], [(1, 0)]]),
        (3, [1, 0, 2], 1, [[(0, 0), (2, 0), (2, 1)]]),
    ],
    ids=["2->3", "3->1"],
)
def test_split_list_state_is_cut_into_contiguous_near_equal_parts_in_old_subtask_order(
    old_p, sizes, new_p, parts
):
    snapshots = list_state_snapshots(old_p, sizes)
    got = []
    for index in range(new_p):
        function = Remembering()
        start(MapOperator("m", "m", function), index, new_p, handed_to(snapshots, index, new_p))
        assert function.was_restored is True
        got.append([tuple(element) for element in function.restored[0]])
    assert got == parts


@RESCALES
def test_union_list_state_gives_every_new_subtask_every_element(old_p, new_p):
    snapshots = list_state_snapshots(old_p, [1] * old_p)
    for index in range(new_p):
        function = Remembering()
        start(MapOperator("m", "m", function), index, new_p, handed_to(snapshots, index, new_p))
        assert function.restored[1] == [f"u{i}" for i in range(old_p)]


def test_split_list_state_stays_with_its_subtask_at_the_same_parallelism():
    snapshots = list_state_snapshots(2, [4, 1])
    for index, expected in enumerate([[(0, n) for n in range(4)], [(1, 0)]]):
        function = Remembering()
        start(MapOperator("m", "m", function), index, 2, handed_to(snapshots, index, 2))
        assert [tuple(e) for e in function.restored[0]] == expected


def test_list_state_elements_may_be_any_picklable_value():
    value = {"set": {1, 2}, "tuple": (1, "a"), "bytes": b"\x00"}
    function = Remembering([value])
    operator = MapOperator("m", "m", function)
    start(operator, 0, 1)
    snapshots = [operator.snapshot_state(1)]
    json.dumps(decode_operator_state(encode_operator_state(snapshots[0].operator)), default=str)
    again = Remembering()
    start(MapOperator("m", "m", again), 0, 1, handed_to(snapshots, 0, 1))
    assert again.restored[0] == [value]


class CountsPerKey(KeyedProcessFunction, CheckpointedFunction):
    """A keyed process function that also keeps operator state: records seen per subtask."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("n"))
        self.seen = sum(self.state.get())

    def snapshot_state(self, context):
        self.state.update([self.seen])

    def process_element(self, value, ctx):
        self.seen += 1


@RESCALES
def test_a_keyed_function_keeps_operator_state_next_to_its_keyed_state(old_p, new_p):
    snapshots = []
    for index in range(old_p):
        operator = KeyedProcessOperator("p", "p", lambda r: r, CountsPerKey())
        start(operator, index, old_p)
        operator.process_batch(RecordBatch([k for k in KEYS if owner(k, old_p) == index]))
        snapshots.append(operator.snapshot_state(1))
        assert snapshots[-1].keyed is not None and snapshots[-1].operator is not None
    total = 0
    for index in range(new_p):
        function = CountsPerKey()
        operator = KeyedProcessOperator("p", "p", lambda r: r, function)
        start(operator, index, new_p, handed_to(snapshots, index, new_p), "new")
        total += function.seen
    assert total == len(KEYS)


class KeepsEverything(CheckpointedFunction):
    """Remembers every value it saw in a split list; usable as filter, flat_map or process."""

    def initialize_state(self, context):
        self.state = context.get_operator_state_store().get_list_state(ListStateDescriptor("v"))
        self.values = self.state.get()

    def snapshot_state(self, context):
        self.state.update(self.values)

    def remember(self, value, ctx=None):
        self.values.append(value)
        return [value]


class KeepingFilter(KeepsEverything, FilterFunction):
    def filter(self, value):
        return bool(self.remember(value))


class KeepingFlatMap(KeepsEverything, FlatMapFunction):
    def flat_map(self, value):
        return self.remember(value)


class KeepingProcess(KeepsEverything, ProcessFunction):
    def process_element(self, value, ctx):
        return self.remember(value)


@pytest.mark.parametrize(
    ("operator_class", "function_class"),
    [
        (FilterOperator, KeepingFilter),
        (FlatMapOperator, KeepingFlatMap),
        (ProcessOperator, KeepingProcess),
    ],
    ids=["filter", "flat_map", "process"],
)
@RESCALES
def test_filter_flat_map_and_process_functions_keep_operator_list_state(
    operator_class, function_class, old_p, new_p
):
    snapshots = []
    for index in range(old_p):
        operator = operator_class("f", "f", function_class())
        start(operator, index, old_p)
        operator.process_batch(RecordBatch([f"{index}-{n}" for n in range(3)]))
        snapshots.append(operator.snapshot_state(1))
    restored = []
    for index in range(new_p):
        function = function_class()
        start(operator_class("f", "f", function), index, new_p, handed_to(snapshots, index, new_p))
        restored += function.values
    assert restored == [f"{i}-{n}" for i in range(old_p) for n in range(3)]
