"""Joining two streams: the interval join and the window join (co-group), Flink's way.

- `interval_join`: `IntervalJoinLogic`, Flink's IntervalJoinOperator as pure logic.
- `window_join`: the tagged union, its key selector and the co-group window function
  a window join is built from (the windows themselves come from the windowing package).
- `spec`: `IntervalJoinSpec`, what the interval join operator is built from.

The join function classes are in `barrierflow.core.join_functions`; the builders users
chain (`IntervalJoin`, `JoinedStreams`, `CoGroupedStreams`) in `barrierflow.api.joins`.
"""

from barrierflow.runtime.joins.interval_join import (
    IntervalJoinLogic,
    JoinedRecord,
    JoinSide,
    LateRecord,
)
from barrierflow.runtime.joins.spec import IntervalJoinSpec
from barrierflow.runtime.joins.window_join import (
    CoGroupWindowFunction,
    JoinCoGroupFunction,
    TaggedUnion,
    UnionKeySelector,
)

__all__ = [
    "CoGroupWindowFunction",
    "IntervalJoinLogic",
    "IntervalJoinSpec",
    "JoinCoGroupFunction",
    "JoinSide",
    "JoinedRecord",
    "LateRecord",
    "TaggedUnion",
    "UnionKeySelector",
]
