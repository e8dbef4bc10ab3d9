"""The IntervalJoinOperator driven directly: joins within the bounds, late records to side
outputs, the minimum watermark of both inputs, and buffers surviving snapshot, restore and
rescaling (no Spark)."""

from __future__ import annotations

from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import OutputTag
from barrierflow.functions import ProcessJoinFunction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.joins.spec import IntervalJoinSpec
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.interval_join import IntervalJoinOperator
from barrierflow.state.backend import canonical_section
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group

LEFT_LATE = OutputTag("left-late")
RIGHT_LATE = OutputTag("right-late")


class Pair(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield (left[1], right[1], ctx.get_timestamp())


def join_operator(restored=None, key_group_range=None, **bounds):
    spec = IntervalJoinSpec.create(
        bounds.get("lower", -2),
        bounds.get("upper", 1),
        process_join_function=Pair(),
        upper_inclusive=bounds.get("upper_inclusive", True),
        left_late_data_output_tag=LEFT_LATE,
        right_late_data_output_tag=RIGHT_LATE,
    )
    operator = IntervalJoinOperator("j", "j", lambda r: r[0], lambda r: r[0], spec)
    settings = {"key_group_range": key_group_range} if key_group_range else {}
    started(operator, ManualClock(), restored, **settings)
    return operator, operator.output


def test_each_pair_within_the_bounds_is_joined_once_at_the_later_timestamp():
    operator, out = join_operator()
    operator.process_batch1(RecordBatch([("k", "L5"), ("x", "X5")], [5, 5]))
    operator.process_batch2(RecordBatch([("k", "R4"), ("k", "R7"), ("k", "R3")], [4, 7, 3]))
    operator.process_batch1(RecordBatch([("k", "L6")], [6]))
    assert out.take() == [
        ("record", ("L5", "R4", 5), 5),
        ("record", ("L5", "R3", 5), 5),
        ("record", ("L6", "R4", 6), 6),
        ("record", ("L6", "R7", 7), 7),
    ]


def test_an_exclusive_upper_bound_leaves_out_the_pair_at_the_bound():
    operator, out = join_operator(upper_inclusive=False)
    operator.process_batch1(RecordBatch([("k", "L5")], [5]))
    operator.process_batch2(RecordBatch([("k", "R6"), ("k", "R5")], [6, 5]))
    assert out.take() == [("record", ("L5", "R5", 5), 5)]


def test_records_below_the_combined_watermark_go_to_their_sides_late_output():
    operator, out = join_operator()
    operator.process_watermark1(Watermark(10))
    operator.process_batch1(RecordBatch([("k", "L8")], [8]))  # the watermark is still MIN
    operator.process_watermark2(Watermark(10))
    operator.process_batch1(RecordBatch([("k", "L9")], [9]))
    operator.process_batch2(RecordBatch([("k", "R9")], [9]))
    assert out.take() == [
        ("watermark", 10),
        ("side", "left-late", ("k", "L9"), 9),
        ("side", "right-late", ("k", "R9"), 9),
    ]


def test_buffers_survive_a_snapshot_and_restore_but_not_their_cleanup():
    operator, _ = join_operator()
    operator.process_batch1(RecordBatch([("k", "L5"), ("j", "J1")], [5, 1]))
    snapshot = operator.snapshot_state(1)
    assert snapshot is not None and snapshot.keyed is not None

    again, out = join_operator(RestoredState(keyed=[canonical_section(snapshot.keyed)]))
    again.process_batch2(RecordBatch([("k", "R6"), ("j", "R2")], [6, 2]))
    assert out.take() == [("record", ("L5", "R6", 6), 6), ("record", ("J1", "R2", 2), 2)]
    again.process_watermark1(Watermark(100))
    again.process_watermark2(Watermark(100))
    assert again.logic is not None and again.logic.buffered_keys() == []


def test_a_restore_at_another_parallelism_takes_only_its_own_keys():
    operator, _ = join_operator()
    keys = [f"k{i}" for i in range(20)]
    operator.process_batch1(RecordBatch([(k, f"L-{k}") for k in keys], [5] * len(keys)))
    snapshot = operator.snapshot_state(1)
    assert snapshot is not None
    keyed = canonical_section(snapshot.keyed)

    taken = []
    for half in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        part, _ = join_operator(RestoredState(keyed=[keyed]), key_group_range=half)
        assert part.logic is not None
        mine = part.logic.buffered_keys()
        assert all(assign_to_key_group(k, 128) in half for k in mine)
        taken += mine
    assert sorted(taken) == sorted(keys)
