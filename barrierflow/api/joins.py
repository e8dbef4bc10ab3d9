"""The join builders users chain: interval joins, window joins and co-groups (Flink's names).

    # interval join: keyed streams, bounds in ms (or a Duration when not negative)
    orders.key_by(lambda o: o.id).interval_join(shipments.key_by(lambda s: s.order_id)) \\
          .between(-2_000, 5_000).upper_bound_exclusive().process(MyProcessJoinFunction())

    # window join
    clicks.join(views).where(lambda c: c.user).equal_to(lambda v: v.user) \\
          .window(TumblingEventTimeWindows.of(Duration.of_seconds(10))) \\
          .apply(lambda click, view: (click.user, click.ts, view.ts))

`KeyedStream.interval_join(other)` returns `IntervalJoin(self, other)`;
`DataStream.join(other)` returns `JoinedStreams(self, other)` and `DataStream.co_group(other)`
returns `CoGroupedStreams(self, other)`. Everything is checked when the job is defined.

A window join (and a co-group) is built the way Flink builds it, from ordinary
operations of the streams: `map` (tag each side), `union`, `key_by`, `window`, then the
window's `trigger` / `evictor` / `allowed_lateness` if set, and `apply`. An interval join
is one two-input operator (`runtime.operators.interval_join`) built from an
`IntervalJoinSpec`.

>>> from barrierflow import StreamExecutionEnvironment
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> left = env.from_collection([1]).key_by(lambda v: v)
>>> right = env.from_collection([1]).key_by(lambda v: v)
>>> _ = left.interval_join(right).between(-5, 10).process(lambda l, r, ctx: [(l, r)]).print()
>>> [v.name for v in env.get_job_graph().vertices]
['Collection', 'Collection', 'IntervalJoin -> Print']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from barrierflow.api.checkpointed_functions import refuse_checkpointed
from barrierflow.api.connected_streams import add_two_input_operator
from barrierflow.api.datastream import DataStream, KeyedStream
from barrierflow.core.join_functions import as_co_group, as_flat_join
from barrierflow.core.time import Duration, to_millis
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.joins.spec import IntervalJoinSpec
from barrierflow.runtime.joins.window_join import (
    CoGroupWindowFunction,
    JoinCoGroupFunction,
    UnionKeySelector,
    tag_first,
    tag_second,
)
from barrierflow.runtime.operators.interval_join import IntervalJoinOperator

__all__ = [
    "CoGroupedStreams",
    "IntervalJoin",
    "IntervalJoined",
    "JoinedStreams",
]


# ---- interval join -----------------------------------------------------------------------------


class IntervalJoin:
    """`left.interval_join(right)`, waiting for its bounds (Flink's `KeyedStream.IntervalJoin`).

    Joins elements of the two keyed streams with the same key where
    `left.ts + lower_bound <= right.ts <= left.ts + upper_bound`, in event time.
    """

    def __init__(self, left: KeyedStream, right: KeyedStream) -> None:
        for side, stream in (("left", left), ("right", right)):
            if not isinstance(stream, KeyedStream):
                raise TypeError(
                    f"interval_join joins two KeyedStreams, got {type(stream).__name__} "
                    f"on the {side}"
                )
        self._left = left
        self._right = right

    def in_event_time(self) -> IntervalJoin:
        return self

    def in_processing_time(self) -> IntervalJoin:
        raise ConfigurationError("interval joins work in event time only (as in Flink)")

    def between(self, lower_bound: int | Duration, upper_bound: int | Duration) -> IntervalJoined:
        """The bounds, inclusive, in ms or as Durations (a negative bound must be ms)."""
        lower = to_millis(lower_bound, "lower_bound")
        upper = to_millis(upper_bound, "upper_bound")
        if lower > upper:
            raise ConfigurationError(
                f"an interval join needs lower_bound <= upper_bound, got {lower} > {upper}"
            )
        return IntervalJoined(self._left, self._right, lower, upper)


class IntervalJoined:
    """An interval join with its bounds, waiting for its `ProcessJoinFunction`."""

    def __init__(
        self, left: KeyedStream, right: KeyedStream, lower_bound: int, upper_bound: int
    ) -> None:
        self._left = left
        self._right = right
        self._lower_bound = lower_bound
        self._upper_bound = upper_bound
        self._lower_inclusive = True
        self._upper_inclusive = True
        self._left_late_tag: Any = None
        self._right_late_tag: Any = None

    def lower_bound_exclusive(self) -> IntervalJoined:
        self._lower_inclusive = False
        return self

    def upper_bound_exclusive(self) -> IntervalJoined:
        self._upper_inclusive = False
        return self

    def side_output_left_late_data(self, output_tag: Any) -> IntervalJoined:
        """Send left elements that arrive below the watermark to `output_tag`."""
        if output_tag is None:
            raise ConfigurationError("the late-data output tag cannot be None")
        self._left_late_tag = output_tag
        return self

    def side_output_right_late_data(self, output_tag: Any) -> IntervalJoined:
        """Send right elements that arrive below the watermark to `output_tag`."""
        if output_tag is None:
            raise ConfigurationError("the late-data output tag cannot be None")
        self._right_late_tag = output_tag
        return self

    def process(self, process_join_function: Any, output_type: Any = None) -> DataStream:
        """Complete the join: `process_join_function` is a `ProcessJoinFunction` or a plain
        `f(left, right, ctx)`; returns the joined stream."""
        refuse_checkpointed(process_join_function, "an interval join's process function")
        spec = IntervalJoinSpec.create(
            self._lower_bound,
            self._upper_bound,
            process_join_function=process_join_function,
            lower_inclusive=self._lower_inclusive,
            upper_inclusive=self._upper_inclusive,
            left_late_data_output_tag=self._left_late_tag,
            right_late_data_output_tag=self._right_late_tag,
            output_type=output_type,
        )
        return add_two_input_operator(
            self._left,
            self._right,
            "IntervalJoin",
            IntervalJoinOperator,
            self._left._key_selector,
            self._right._key_selector,
            spec,
        )._declare(output_type, "process")


# ---- window join and co-group ------------------------------------------------------------------


@dataclass(frozen=True)
class _WindowedTwoInputs:
    """What a window join or co-group has collected so far."""

    input1: Any
    input2: Any
    key_selector1: Any = None
    key_selector2: Any = None
    window_assigner: Any = None
    trigger: Any = None
    evictor: Any = None
    allowed_lateness: int | None = None


def _check_key_selector(key_selector: Any, which: str) -> Any:
    if not callable(key_selector) and not callable(getattr(key_selector, "get_key", None)):
        raise TypeError(f"{which} needs a KeySelector or a callable, got {key_selector!r}")
    return key_selector


def _co_group_windows(inputs: _WindowedTwoInputs, co_group_function: Any, output_type: Any) -> Any:
    """Flink's `CoGroupedStreams.WithWindow.apply`, from ordinary stream operations."""
    tagged1 = inputs.input1.map(tag_first)
    tagged2 = inputs.input2.map(tag_second)
    keyed = tagged1.union(tagged2).key_by(
        UnionKeySelector(inputs.key_selector1, inputs.key_selector2)
    )
    windowed = keyed.window(inputs.window_assigner)
    if inputs.trigger is not None:
        windowed = windowed.trigger(inputs.trigger)
    if inputs.evictor is not None:
        windowed = windowed.evictor(inputs.evictor)
    if inputs.allowed_lateness is not None:
        windowed = windowed.allowed_lateness(inputs.allowed_lateness)
    return windowed.apply(CoGroupWindowFunction(co_group_function), output_type)


class _WithWindow:
    """Shared by `JoinedStreams.WithWindow` and `CoGroupedStreams.WithWindow`."""

    def __init__(self, inputs: _WindowedTwoInputs) -> None:
        self._inputs = inputs

    def trigger(self, trigger: Any) -> _WithWindow:
        return type(self)(replace(self._inputs, trigger=trigger))

    def evictor(self, evictor: Any) -> _WithWindow:
        return type(self)(replace(self._inputs, evictor=evictor))

    def allowed_lateness(self, lateness: int | Duration) -> _WithWindow:
        millis = to_millis(lateness, "allowed_lateness")
        if millis < 0:
            raise ConfigurationError(f"allowed_lateness must be >= 0 ms, got {millis}")
        return type(self)(replace(self._inputs, allowed_lateness=millis))


class JoinedStreams:
    """`a.join(b)`: an inner join of two streams per key and window (Flink's `JoinedStreams`).

    Chain `.where(key_a).equal_to(key_b).window(assigner)`, optionally `.trigger(...)`,
    `.evictor(...)`, `.allowed_lateness(...)`, then `.apply(join_function)`. Each pair
    of one key and window is joined once; results carry the window's max timestamp.
    """

    def __init__(self, input1: Any, input2: Any) -> None:
        self._inputs = _WindowedTwoInputs(input1, input2)

    def where(self, key_selector: Any, key_type: Any = None) -> JoinedStreams.Where:
        inputs = replace(self._inputs, key_selector1=_check_key_selector(key_selector, "where"))
        return JoinedStreams.Where(inputs)

    class Where:
        def __init__(self, inputs: _WindowedTwoInputs) -> None:
            self._inputs = inputs

        def equal_to(self, key_selector: Any, key_type: Any = None) -> JoinedStreams.EqualTo:
            selector = _check_key_selector(key_selector, "equal_to")
            return JoinedStreams.EqualTo(replace(self._inputs, key_selector2=selector))

    class EqualTo:
        def __init__(self, inputs: _WindowedTwoInputs) -> None:
            self._inputs = inputs

        def window(self, window_assigner: Any) -> JoinedStreams.WithWindow:
            if window_assigner is None:
                raise ConfigurationError("a window join needs a window assigner")
            return JoinedStreams.WithWindow(replace(self._inputs, window_assigner=window_assigner))

    class WithWindow(_WithWindow):
        def apply(self, join_function: Any, output_type: Any = None) -> Any:
            """Join every pair with `join_function`: a `JoinFunction`, a `FlatJoinFunction`
            or a plain `f(first, second)` returning one result."""
            as_flat_join(join_function)  # raises for what is not a join function
            refuse_checkpointed(join_function, "a window join's join function")
            return _co_group_windows(self._inputs, JoinCoGroupFunction(join_function), output_type)


class CoGroupedStreams:
    """`a.co_group(b)`: all elements of both streams per key and window, handed to one
    `CoGroupFunction` call (Flink's `CoGroupedStreams`)."""

    def __init__(self, input1: Any, input2: Any) -> None:
        self._inputs = _WindowedTwoInputs(input1, input2)

    def where(self, key_selector: Any, key_type: Any = None) -> CoGroupedStreams.Where:
        inputs = replace(self._inputs, key_selector1=_check_key_selector(key_selector, "where"))
        return CoGroupedStreams.Where(inputs)

    class Where:
        def __init__(self, inputs: _WindowedTwoInputs) -> None:
            self._inputs = inputs

        def equal_to(self, key_selector: Any, key_type: Any = None) -> CoGroupedStreams.EqualTo:
            selector = _check_key_selector(key_selector, "equal_to")
            return CoGroupedStreams.EqualTo(replace(self._inputs, key_selector2=selector))

    class EqualTo:
        def __init__(self, inputs: _WindowedTwoInputs) -> None:
            self._inputs = inputs

        def window(self, window_assigner: Any) -> CoGroupedStreams.WithWindow:
            if window_assigner is None:
                raise ConfigurationError("a co-group needs a window assigner")
            return CoGroupedStreams.WithWindow(
                replace(self._inputs, window_assigner=window_assigner)
            )

    class WithWindow(_WithWindow):
        def apply(self, co_group_function: Any, output_type: Any = None) -> Any:
            """Call `co_group_function` (a `CoGroupFunction` or a plain `f(first, second)`)
            once per key and window."""
            as_co_group(co_group_function)  # raises for what is not a co-group function
            refuse_checkpointed(co_group_function, "a co-group function")
            return _co_group_windows(self._inputs, co_group_function, output_type)
