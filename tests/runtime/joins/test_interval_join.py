"""IntervalJoinLogic against Flink's rules and against a brute-force nested loop.

Unit cases follow Flink's `IntervalJoinOperatorTest` (bounds and inclusivity, cleanup
times, late elements, the context's timestamps); the properties feed random keyed,
out-of-order input and compare the join with every pair a nested loop finds.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.core.join_functions import ProcessJoinFunction
from barrierflow.core.time import Duration
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.runtime.joins.interval_join import (
    MIN_WATERMARK,
    IntervalJoinLogic,
    JoinedRecord,
    JoinSide,
    LateRecord,
)

MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True)
class Element:
    side: JoinSide
    key: int
    timestamp: int
    id: int


def pair(left: Any, right: Any, ctx: ProcessJoinFunction.Context) -> list[Any]:
    """A join function that reports the pair and what its context said."""
    return [(left, right, ctx.get_left_timestamp(), ctx.get_right_timestamp(), ctx.get_timestamp())]


def feed(join: IntervalJoinLogic, element: Element, watermark: int) -> list[Any]:
    process = join.process_left if element.side is JoinSide.LEFT else join.process_right
    return process(element.key, element, element.timestamp, watermark)


def matches(
    left_ts: int, right_ts: int, lower: int, upper: int, lower_inc: bool, upper_inc: bool
) -> bool:
    """The join condition, written out: left + lower <= right <= left + upper."""
    delta = right_ts - left_ts
    above = delta >= lower if lower_inc else delta > lower
    below = delta <= upper if upper_inc else delta < upper
    return above and below


def brute_force(
    elements: list[Element], lower: int, upper: int, lower_inc: bool, upper_inc: bool
) -> Counter[tuple[int, int, int]]:
    lefts = [e for e in elements if e.side is JoinSide.LEFT]
    rights = [e for e in elements if e.side is JoinSide.RIGHT]
    return Counter(
        (left.id, right.id, max(left.timestamp, right.timestamp))
        for left in lefts
        for right in rights
        if left.key == right.key
        and matches(left.timestamp, right.timestamp, lower, upper, lower_inc, upper_inc)
    )


def joined(outputs: list[Any]) -> Counter[tuple[int, int, int]]:
    """The pairs in a list of outputs, checking each output's timestamps on the way."""
    found: Counter[tuple[int, int, int]] = Counter()
    for output in outputs:
        assert isinstance(output, JoinedRecord), output
        left, right, left_ts, right_ts, ctx_ts = output.value
        assert left.side is JoinSide.LEFT and right.side is JoinSide.RIGHT
        assert (left_ts, right_ts) == (left.timestamp, right.timestamp)
        assert ctx_ts == output.timestamp == max(left.timestamp, right.timestamp)
        found[(left.id, right.id, output.timestamp)] += 1
    return found


def expected_cleanup_time(side: JoinSide, timestamp: int, lower: int, upper: int) -> int:
    """Flink's cleanup time for the (already inclusive) bounds, written independently."""
    if side is JoinSide.LEFT:
        return timestamp + upper if upper > 0 else timestamp
    return timestamp - lower if lower < 0 else timestamp


# ---- bounds and inclusivity --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower_inc", "upper_inc", "matching_offsets"),
    [
        (True, True, [-3, -2, 3, 4]),
        (False, True, [-2, 3, 4]),
        (True, False, [-3, -2, 3]),
        (False, False, [-2, 3]),
    ],
    ids=["[-3, 4]", "(-3, 4]", "[-3, 4)", "(-3, 4)"],
)
@pytest.mark.parametrize("left_first", [True, False], ids=["left first", "right first"])
def test_a_right_element_joins_when_its_offset_is_within_the_bounds(
    lower_inc: bool, upper_inc: bool, matching_offsets: list[int], left_first: bool
) -> None:
    join = IntervalJoinLogic(-3, 4, lower_inc, upper_inc, lambda left, right, ctx: [right])
    offsets = [-4, -3, -2, 3, 4, 5]
    outputs = []
    if left_first:
        outputs += join.process_left("k", "L", 100, MIN_WATERMARK)
    for offset in offsets:
        outputs += join.process_right("k", offset, 100 + offset, MIN_WATERMARK)
    if not left_first:
        outputs += join.process_left("k", "L", 100, MIN_WATERMARK)
    assert sorted(o.value for o in outputs) == matching_offsets


def test_equal_bounds_join_exactly_that_offset_and_exclusive_ones_nothing() -> None:
    exact = IntervalJoinLogic(2, 2, process_join_function=lambda left, right, ctx: [right])
    exact.process_left("k", "L", 10, MIN_WATERMARK)
    assert [o.value for o in exact.process_right("k", "R12", 12, MIN_WATERMARK)] == ["R12"]
    assert exact.process_right("k", "R11", 11, MIN_WATERMARK) == []

    never = IntervalJoinLogic(2, 2, False, True, lambda left, right, ctx: [right])
    never.process_left("k", "L", 10, MIN_WATERMARK)
    assert never.process_right("k", "R12", 12, MIN_WATERMARK) == []


def test_a_lower_bound_above_the_upper_bound_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="lower_bound <= upper_bound"):
        IntervalJoinLogic(5, 4, process_join_function=pair)


def test_bounds_may_be_durations() -> None:
    join = IntervalJoinLogic(
        Duration.of_millis(0), Duration.of_seconds(1), process_join_function=pair
    )
    assert (join.lower_bound, join.upper_bound) == (0, 1_000)


def test_a_join_function_is_required() -> None:
    with pytest.raises(ConfigurationError, match="ProcessJoinFunction"):
        IntervalJoinLogic(0, 1)
    with pytest.raises(TypeError, match="ProcessJoinFunction or a callable"):
        IntervalJoinLogic(0, 1, process_join_function="not a function")


def test_elements_without_timestamps_are_refused() -> None:
    join = IntervalJoinLogic(0, 1, process_join_function=pair)
    with pytest.raises(ValueError, match="timestamps"):
        join.process_left("k", "L", None, MIN_WATERMARK)
    with pytest.raises(ValueError, match="timestamps"):
        join.process_right("k", "R", MIN_WATERMARK, MIN_WATERMARK)


# ---- outputs and context -----------------------------------------------------------------------


def test_outputs_carry_the_greater_timestamp_and_the_context_both_timestamps() -> None:
    seen = []

    class Recording(ProcessJoinFunction):
        def process_element(self, left: Any, right: Any, ctx: ProcessJoinFunction.Context) -> Any:
            seen.append((ctx.get_left_timestamp(), ctx.get_right_timestamp(), ctx.get_timestamp()))
            yield f"{left}+{right}"

    join = IntervalJoinLogic(-10, 10, process_join_function=Recording())
    join.process_left("k", "L", 20, MIN_WATERMARK)
    assert join.process_right("k", "R", 15, MIN_WATERMARK) == [JoinedRecord("L+R", 20)]
    assert join.process_right("k", "S", 27, MIN_WATERMARK) == [JoinedRecord("L+S", 27)]
    assert seen == [(20, 15, 20), (20, 27, 27)]


@pytest.mark.parametrize(
    ("returned", "expected"),
    [(None, []), ([], []), (["x", "y"], ["x", "y"])],
    ids=["none", "empty", "two"],
)
def test_the_join_function_may_return_any_number_of_outputs(returned: Any, expected: list) -> None:
    join = IntervalJoinLogic(0, 0, process_join_function=lambda left, right, ctx: returned)
    join.process_left("k", "L", 5, MIN_WATERMARK)
    assert [o.value for o in join.process_right("k", "R", 5, MIN_WATERMARK)] == expected


def test_elements_of_different_keys_never_join() -> None:
    join = IntervalJoinLogic(-5, 5, process_join_function=lambda left, right, ctx: [(left, right)])
    join.process_left("a", "La", 10, MIN_WATERMARK)
    assert join.process_right("b", "Rb", 10, MIN_WATERMARK) == []
    assert [o.value for o in join.process_right("a", "Ra", 10, MIN_WATERMARK)] == [("La", "Ra")]


def test_elements_at_the_same_timestamp_all_join() -> None:
    join = IntervalJoinLogic(0, 0, process_join_function=lambda left, right, ctx: [(left, right)])
    join.process_left("k", "L1", 5, MIN_WATERMARK)
    join.process_left("k", "L2", 5, MIN_WATERMARK)
    outputs = join.process_right("k", "R", 5, MIN_WATERMARK)
    assert [o.value for o in outputs] == [("L1", "R"), ("L2", "R")]


# ---- late elements -----------------------------------------------------------------------------


@pytest.mark.parametrize("side", list(JoinSide))
def test_an_element_below_the_watermark_is_returned_as_late_and_never_joins(side: JoinSide) -> None:
    join = IntervalJoinLogic(
        -100, 100, process_join_function=lambda left, right, ctx: [(left, right)]
    )
    process = join.process_left if side is JoinSide.LEFT else join.process_right
    other = join.process_right if side is JoinSide.LEFT else join.process_left

    assert process("k", "late", 9, 10) == [LateRecord(side, "late", 9)]
    assert join.buffered_timestamps("k") == ([], [])
    assert other("k", "on time", 50, 10) == [], "a late element must not be buffered"


def test_an_element_at_the_watermark_is_not_late() -> None:
    join = IntervalJoinLogic(0, 0, process_join_function=lambda left, right, ctx: [(left, right)])
    assert join.process_left("k", "L", 10, 10) == []
    assert join.buffered_timestamps("k") == ([10], [])


def test_before_the_first_watermark_nothing_is_late() -> None:
    join = IntervalJoinLogic(0, 0, process_join_function=pair)
    assert join.process_left("k", "L", -(2**40), MIN_WATERMARK) == []


def test_without_a_watermark_argument_the_last_on_watermark_decides_lateness() -> None:
    join = IntervalJoinLogic(0, 0, process_join_function=pair)
    join.on_watermark(10)
    assert join.process_left("k", "L", 9) == [LateRecord(JoinSide.LEFT, "L", 9)]
    assert join.process_left("k", "L", 10) == []


# ---- cleanup -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower", "upper", "side", "timestamp", "cleanup"),
    [
        (-3, 4, JoinSide.LEFT, 100, 104),  # upper > 0: kept until ts + upper
        (-3, 4, JoinSide.RIGHT, 100, 103),  # lower < 0: kept until ts - lower
        (-5, -2, JoinSide.LEFT, 100, 100),  # upper <= 0: only until its own time
        (-5, -2, JoinSide.RIGHT, 100, 105),
        (2, 6, JoinSide.LEFT, 100, 106),
        (2, 6, JoinSide.RIGHT, 100, 100),  # lower >= 0: only until its own time
        (0, 0, JoinSide.LEFT, 100, 100),
        (0, 0, JoinSide.RIGHT, 100, 100),
    ],
)
def test_a_buffered_element_is_cleaned_up_exactly_at_its_cleanup_time(
    lower: int, upper: int, side: JoinSide, timestamp: int, cleanup: int
) -> None:
    join = IntervalJoinLogic(lower, upper, process_join_function=pair)
    assert join.cleanup_time(side, timestamp) == cleanup
    process = join.process_left if side is JoinSide.LEFT else join.process_right
    process("k", "x", timestamp, MIN_WATERMARK)
    buffered = 0 if side is JoinSide.LEFT else 1

    join.on_watermark(cleanup - 1)
    assert join.buffered_timestamps("k")[buffered] == [timestamp]
    join.on_watermark(cleanup)
    assert join.buffered_timestamps("k") == ([], [])
    assert join.buffered_keys() == [] and join.num_cleanup_timers == 0


def test_exclusive_bounds_shorten_the_time_an_element_is_kept() -> None:
    join = IntervalJoinLogic(-3, 4, False, False, pair)
    assert join.cleanup_time(JoinSide.LEFT, 100) == 103
    assert join.cleanup_time(JoinSide.RIGHT, 100) == 102


def test_elements_at_one_timestamp_share_one_cleanup_timer() -> None:
    join = IntervalJoinLogic(0, 5, process_join_function=pair)
    for value in "abc":
        join.process_left("k", value, 10, MIN_WATERMARK)
    join.process_left("k", "d", 11, MIN_WATERMARK)
    join.process_left("other", "e", 10, MIN_WATERMARK)
    assert join.num_cleanup_timers == 3
    join.on_watermark(15)
    assert join.buffered_timestamps("k") == ([11], []) and join.num_cleanup_timers == 1


# ---- snapshot and restore ----------------------------------------------------------------------


def test_the_snapshot_is_plain_data_per_key_and_a_copy() -> None:
    join = IntervalJoinLogic(-1, 1, process_join_function=pair)
    join.process_left("a", "L2", 2, MIN_WATERMARK)
    join.process_left("a", "L1", 1, MIN_WATERMARK)
    join.process_left("a", "L1b", 1, MIN_WATERMARK)
    join.process_right("b", "R5", 5, MIN_WATERMARK)
    snapshot = join.snapshot()
    assert snapshot == {
        "a": {"left": [[1, ["L1", "L1b"]], [2, ["L2"]]], "right": []},
        "b": {"left": [], "right": [[5, ["R5"]]]},
    }
    join.process_left("a", "L1c", 1, MIN_WATERMARK)
    assert snapshot["a"]["left"][0] == [1, ["L1", "L1b"]]


def test_a_restored_join_continues_as_the_original_would_and_cleans_up_on_time() -> None:
    def fresh() -> IntervalJoinLogic:
        return IntervalJoinLogic(
            -2, 3, process_join_function=lambda left, right, ctx: [(left, right)]
        )

    original = fresh()
    original.process_left("k", "L10", 10, MIN_WATERMARK)
    original.process_right("k", "R20", 20, MIN_WATERMARK)
    original.on_watermark(5)

    restored = fresh()
    restored.restore(original.snapshot())
    assert restored.num_cleanup_timers == original.num_cleanup_timers == 2

    for join in (original, restored):
        assert [o.value for o in join.process_right("k", "R12", 12, 5)] == [("L10", "R12")]
    restored.on_watermark(13)  # L10 is due at 13; R20 at 22, R12 at 14
    assert restored.buffered_timestamps("k") == ([], [12, 20])


def test_restoring_several_snapshots_merges_their_keys() -> None:
    a = IntervalJoinLogic(0, 1, process_join_function=pair)
    a.process_left("a", "La", 1, MIN_WATERMARK)
    b = IntervalJoinLogic(0, 1, process_join_function=pair)
    b.process_right("b", "Rb", 1, MIN_WATERMARK)

    merged = IntervalJoinLogic(0, 1, process_join_function=pair)
    merged.restore(a.snapshot())
    merged.restore(b.snapshot())
    assert sorted(merged.buffered_keys()) == ["a", "b"]
    with pytest.raises(StateRestoreError, match="restored twice"):
        merged.restore(a.snapshot())


def test_a_malformed_snapshot_is_a_restore_error() -> None:
    join = IntervalJoinLogic(0, 1, process_join_function=pair)
    with pytest.raises(StateRestoreError, match="malformed"):
        join.restore({"k": {"left": [["not a timestamp", ["x"]]]}})


# ---- properties against a nested loop ----------------------------------------------------------

bounds = st.integers(-20, 20).flatmap(
    lambda lower: st.tuples(st.just(lower), st.integers(lower, lower + 30))
)


@st.composite
def keyed_events(draw: st.DrawFn, even_timestamps: bool = False) -> list[Element]:
    """Random left and right elements of three keys, in a shuffled but roughly
    time-ordered arrival order (sorted by timestamp plus a random jitter)."""
    count = draw(st.integers(0, 40))
    jitter = draw(st.integers(0, 30))
    rng = random.Random(draw(st.integers(0, 2**32)))
    elements = []
    for i in range(count):
        timestamp = draw(st.integers(0, 100))
        if even_timestamps:
            timestamp *= 2
        elements.append(
            Element(draw(st.sampled_from(list(JoinSide))), draw(st.integers(0, 2)), timestamp, i)
        )
    return sorted(elements, key=lambda e: e.timestamp + rng.randint(0, jitter))


@settings(max_examples=400, deadline=None)
@given(
    bound=bounds,
    lower_inc=st.booleans(),
    upper_inc=st.booleans(),
    events=keyed_events(),
    slack=st.integers(0, 10),
)
def test_with_a_trailing_watermark_the_join_finds_exactly_the_pairs_a_nested_loop_finds(
    bound: tuple[int, int], lower_inc: bool, upper_inc: bool, events: list[Element], slack: int
) -> None:
    lower, upper = bound
    join = IntervalJoinLogic(lower, upper, lower_inc, upper_inc, pair)
    outputs: list[Any] = []
    watermark = MIN_WATERMARK
    for index, element in enumerate(events):
        outputs += feed(join, element, watermark)
        # The watermark stays strictly below every element still to come.
        future = [e.timestamp for e in events[index + 1 :]]
        candidate = (min(future) if future else 10_000) - 1 - slack
        if candidate > watermark:
            watermark = candidate
            join.on_watermark(watermark)
    assert not any(isinstance(o, LateRecord) for o in outputs)
    assert joined(outputs) == brute_force(events, lower, upper, lower_inc, upper_inc)

    join.on_watermark(MAX_WATERMARK)
    assert join.buffered_keys() == [] and join.num_cleanup_timers == 0


@settings(max_examples=400, deadline=None)
@given(
    bound=bounds,
    lower_inc=st.booleans(),
    upper_inc=st.booleans(),
    events=keyed_events(even_timestamps=True),
    data=st.data(),
)
def test_with_any_watermark_late_elements_are_dropped_and_the_rest_joins_like_a_nested_loop(
    bound: tuple[int, int], lower_inc: bool, upper_inc: bool, events: list[Element], data: Any
) -> None:
    """Watermarks here may overtake the data. Timestamps are even and watermarks odd, so no
    element arrives exactly at the watermark (Flink's contract excludes that case)."""
    lower, upper = bound
    join = IntervalJoinLogic(lower, upper, lower_inc, upper_inc, pair)
    inclusive_lower = lower if lower_inc else lower + 1
    inclusive_upper = upper if upper_inc else upper - 1
    outputs: list[Any] = []
    on_time: list[Element] = []
    watermark = MIN_WATERMARK
    for element in events:
        result = feed(join, element, watermark)
        if watermark != MIN_WATERMARK and element.timestamp < watermark:
            assert result == [LateRecord(element.side, element, element.timestamp)]
        else:
            on_time.append(element)
            outputs += result
        if data.draw(st.booleans(), label="advance the watermark"):
            watermark = max(watermark, 2 * data.draw(st.integers(-1, 110), label="watermark") + 1)
            join.on_watermark(watermark)
        # Cleanup keeps exactly the elements that could still match a future element.
        for key in range(3):
            kept = join.buffered_timestamps(key)
            for side, buffered in zip(JoinSide, kept, strict=True):
                expected = sorted(
                    {
                        e.timestamp
                        for e in on_time
                        if e.side is side
                        and e.key == key
                        and (
                            watermark == MIN_WATERMARK
                            or expected_cleanup_time(
                                side, e.timestamp, inclusive_lower, inclusive_upper
                            )
                            > watermark
                        )
                    }
                )
                assert buffered == expected, f"{side.value} buffer of key {key}"
    assert joined(outputs) == brute_force(on_time, lower, upper, lower_inc, upper_inc)


@settings(max_examples=200, deadline=None)
@given(bound=bounds, events=keyed_events(), cut=st.integers(0, 40))
def test_a_snapshot_and_restore_midway_changes_no_output(
    bound: tuple[int, int], events: list[Element], cut: int
) -> None:
    lower, upper = bound
    straight = IntervalJoinLogic(lower, upper, process_join_function=pair)
    outputs = [o for e in events for o in feed(straight, e, MIN_WATERMARK)]

    first = IntervalJoinLogic(lower, upper, process_join_function=pair)
    before = [o for e in events[:cut] for o in feed(first, e, MIN_WATERMARK)]
    second = IntervalJoinLogic(lower, upper, process_join_function=pair)
    second.restore(first.snapshot())
    after = [o for e in events[cut:] for o in feed(second, e, MIN_WATERMARK)]
    assert joined(before + after) == joined(outputs)
