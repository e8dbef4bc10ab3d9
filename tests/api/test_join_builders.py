"""The join builders: what they check, and the plan they hand to the streams.

A window join is built from ordinary stream operations, so a fake stream that records
them can also run the plan: it puts every element into one window per key, which makes
the plan's output checkable against a nested loop.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.api.datastream import DataStream, KeyedStream
from barrierflow.api.joins import CoGroupedStreams, IntervalJoin, JoinedStreams
from barrierflow.core.time import Duration
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.joins.spec import IntervalJoinSpec
from barrierflow.runtime.joins.window_join import (
    CoGroupWindowFunction,
    UnionKeySelector,
    tag_first,
    tag_second,
)


class FakeStream:
    """Records the operations called on it and evaluates them over one global window."""

    def __init__(self, elements: list[Any], log: list[Any] | None = None) -> None:
        self.elements = elements
        self.log = [] if log is None else log
        self.key_selector: Any = None

    # DataStream
    def map(self, function: Any) -> FakeStream:
        self.log.append(("map", function))
        return FakeStream([function(e) for e in self.elements], self.log)

    def union(self, *others: FakeStream) -> FakeStream:
        self.log.append(("union", len(others)))
        return FakeStream(self.elements + [e for o in others for e in o.elements], self.log)

    def key_by(self, key_selector: Any) -> FakeStream:
        self.log.append(("key_by", key_selector))
        keyed = FakeStream(self.elements, self.log)
        keyed.key_selector = key_selector
        return keyed

    def window(self, assigner: Any) -> FakeStream:
        self.log.append(("window", assigner))
        windowed = FakeStream(self.elements, self.log)
        windowed.key_selector = self.key_selector
        return windowed

    # WindowedStream
    def trigger(self, trigger: Any) -> FakeStream:
        self.log.append(("trigger", trigger))
        return self

    def evictor(self, evictor: Any) -> FakeStream:
        self.log.append(("evictor", evictor))
        return self

    def allowed_lateness(self, millis: int) -> FakeStream:
        self.log.append(("allowed_lateness", millis))
        return self

    def apply(self, window_function: Any, output_type: Any = None) -> list[Any]:
        self.log.append(("apply", window_function))
        by_key: dict[Any, list[Any]] = defaultdict(list)
        for element in self.elements:
            by_key[self.key_selector.get_key(element)].append(element)
        return {key: window_function.apply(key, "w", contents) for key, contents in by_key.items()}


def user(value: tuple[str, int]) -> str:
    return value[0]


CLICKS = [("ann", 1), ("bob", 2), ("ann", 3)]
VIEWS = [("ann", 10), ("cid", 20), ("ann", 30)]


def test_a_window_join_tags_unions_keys_windows_and_applies_a_co_group() -> None:
    log: list[Any] = []
    clicks, views = FakeStream(CLICKS, log), FakeStream(VIEWS, log)
    result = (
        JoinedStreams(clicks, views)
        .where(user)
        .equal_to(user)
        .window("tumbling 10s")
        .apply(lambda click, view: (click[1], view[1]))
    )
    operations = [entry[0] for entry in clicks.log]
    assert operations == ["map", "map", "union", "key_by", "window", "apply"]
    assert clicks.log[0][1] is tag_first and clicks.log[1][1] is tag_second
    assert isinstance(clicks.log[3][1], UnionKeySelector)
    assert clicks.log[4][1] == "tumbling 10s"
    assert isinstance(clicks.log[5][1], CoGroupWindowFunction)
    # One window per key: the plan's output is the nested loop per key.
    assert result == {"ann": [(1, 10), (1, 30), (3, 10), (3, 30)], "bob": [], "cid": []}


def test_trigger_evictor_and_allowed_lateness_are_applied_only_when_set() -> None:
    stream = FakeStream(CLICKS)
    (
        JoinedStreams(stream, FakeStream(VIEWS))
        .where(user)
        .equal_to(user)
        .window("w")
        .trigger("count 2")
        .allowed_lateness(Duration.of_seconds(1))
        .apply(lambda a, b: a)
    )
    operations = [entry for entry in stream.log if entry[0] not in {"map", "union", "key_by"}]
    assert [op[0] for op in operations] == ["window", "trigger", "allowed_lateness", "apply"]
    assert operations[2] == ("allowed_lateness", 1_000)


def test_a_co_group_hands_both_sides_of_each_key_to_the_function() -> None:
    result = (
        CoGroupedStreams(FakeStream(CLICKS), FakeStream(VIEWS))
        .where(user)
        .equal_to(user)
        .window("w")
        .evictor("keep last")
        .apply(lambda first, second: [(len(first), len(second))])
    )
    assert result == {"ann": [(2, 2)], "bob": [(1, 0)], "cid": [(0, 1)]}


@pytest.mark.parametrize("builder", [JoinedStreams, CoGroupedStreams])
def test_key_selectors_and_the_window_assigner_are_checked(builder: Any) -> None:
    streams = builder(FakeStream([]), FakeStream([]))
    with pytest.raises(TypeError, match="where"):
        streams.where("not a key selector")
    with pytest.raises(TypeError, match="equal_to"):
        streams.where(user).equal_to(42)
    with pytest.raises(ConfigurationError, match="window assigner"):
        streams.where(user).equal_to(user).window(None)
    with pytest.raises(ConfigurationError, match="allowed_lateness"):
        streams.where(user).equal_to(user).window("w").allowed_lateness(-1)


def test_a_window_join_refuses_what_is_not_a_join_function() -> None:
    with pytest.raises(TypeError, match="join function"):
        JoinedStreams(FakeStream([]), FakeStream([])).where(user).equal_to(user).window("w").apply(
            "not a function"
        )


# ---- interval join -----------------------------------------------------------------------------


def process(left: Any, right: Any, ctx: Any) -> list[Any]:
    return [(left, right)]


def keyed_pair() -> tuple[KeyedStream, KeyedStream]:
    """Two keyed streams of one environment, ready to be joined."""
    env = StreamExecutionEnvironment.get_execution_environment()
    return (
        env.from_collection([1]).key_by(lambda v: v),
        env.from_collection([2]).key_by(lambda v: -v),
    )


def spec_of(joined: DataStream) -> IntervalJoinSpec:
    """The spec the interval join operator behind `joined` was built with."""
    *_, spec = joined._transformation.operator_args
    return spec


def test_an_interval_join_hands_the_left_stream_a_spec_with_its_bounds_and_options() -> None:
    left, right = keyed_pair()
    result = (
        IntervalJoin(left, right)
        .between(-2_000, Duration.of_seconds(5))
        .lower_bound_exclusive()
        .upper_bound_exclusive()
        .side_output_left_late_data("late-left")
        .side_output_right_late_data("late-right")
        .process(process)
    )
    assert result._transformation.inputs == [left._transformation, right._transformation]
    assert result._transformation.operator_args[:2] == (left._key_selector, right._key_selector)
    spec = spec_of(result)
    assert spec == IntervalJoinSpec(-2_000, 5_000, False, False, process, "late-left", "late-right")
    logic = spec.create_logic()
    assert (logic.lower_bound, logic.upper_bound) == (-1_999, 4_999)


def test_interval_join_bounds_are_inclusive_by_default() -> None:
    spec = spec_of(IntervalJoin(*keyed_pair()).between(0, 10).process(process))
    assert spec.lower_inclusive and spec.upper_inclusive
    assert spec.left_late_data_output_tag is None and spec.right_late_data_output_tag is None


def test_an_interval_join_refuses_bounds_in_the_wrong_order_and_processing_time() -> None:
    join = IntervalJoin(*keyed_pair())
    with pytest.raises(ConfigurationError, match="lower_bound <= upper_bound"):
        join.between(10, 5)
    with pytest.raises(ConfigurationError, match="event time"):
        join.in_processing_time()
    with pytest.raises(TypeError, match="lower_bound"):
        join.between(1.5, 5)
    assert join.in_event_time() is join


def test_an_interval_join_needs_a_join_function_and_a_keyed_left_stream() -> None:
    with pytest.raises(TypeError, match="callable"):
        IntervalJoin(*keyed_pair()).between(0, 1).process("nope")
    with pytest.raises(TypeError, match="KeyedStream"):
        IntervalJoin([1, 2], keyed_pair()[1]).between(0, 1).process(process)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cannot be None"):
        IntervalJoin(*keyed_pair()).between(0, 1).side_output_left_late_data(None)
