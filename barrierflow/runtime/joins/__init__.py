"""Joining two streams: the interval join and the window join (co-group), Flink's way.

- `interval_join`: `IntervalJoinLogic`, Flink's IntervalJoinOperator as pure logic.
- `window_join`: the tagged union, its key selector and the co-group window function
  a window join is built from (the windows themselves come from the windowing package).
- `functions`: `ProcessJoinFunction`, `JoinFunction`, `FlatJoinFunction`, `CoGroupFunction`.
- `api`: the builders users chain (`IntervalJoin`, `JoinedStreams`, `CoGroupedStreams`).
"""

from barrierflow.runtime.joins.api import (
    CoGroupedStreams,
    IntervalJoin,
    IntervalJoined,
    IntervalJoinSpec,
    JoinedStreams,
)
from barrierflow.runtime.joins.functions import (
    CoGroupFunction,
    FlatJoinFunction,
    JoinFunction,
    ProcessJoinFunction,
)
from barrierflow.runtime.joins.interval_join import (
    IntervalJoinLogic,
    JoinedRecord,
    JoinSide,
    LateRecord,
)
from barrierflow.runtime.joins.window_join import (
    CoGroupWindowFunction,
    JoinCoGroupFunction,
    TaggedUnion,
    UnionKeySelector,
)

__all__ = [
    "CoGroupFunction",
    "CoGroupWindowFunction",
    "CoGroupedStreams",
    "FlatJoinFunction",
    "IntervalJoin",
    "IntervalJoinLogic",
    "IntervalJoinSpec",
    "IntervalJoined",
    "JoinCoGroupFunction",
    "JoinFunction",
    "JoinSide",
    "JoinedRecord",
    "JoinedStreams",
    "LateRecord",
    "ProcessJoinFunction",
    "TaggedUnion",
    "UnionKeySelector",
]
