"""Windows, window assigners and triggers, with PyFlink's names and Flink's semantics.

A window assigner puts each element into windows; a trigger decides when a
window is evaluated (FIRE) and when its contents are dropped (PURGE). The public
path of the window model, which lives in `barrierflow/core/windows/`.

    from barrierflow import Duration
    from barrierflow.window import TumblingEventTimeWindows

    stream.key_by(lambda e: e.user).window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))

Times and sizes are milliseconds: an int or a `barrierflow.Duration`.

>>> from barrierflow import Duration
>>> TumblingEventTimeWindows.of(Duration.of_seconds(10)).assign_windows("e", 12_345, None)
[TimeWindow(start=10000, end=20000)]
>>> SlidingEventTimeWindows.of(10, 5).assign_windows("e", 12, None)
[TimeWindow(start=10, end=20), TimeWindow(start=5, end=15)]
>>> EventTimeSessionWindows.with_gap(30).assign_windows("e", 100, None)
[TimeWindow(start=100, end=130)]

Caveats: an event-time window fires once the watermark reaches its
`max_timestamp()` (end - 1). An element is late when every window it belongs to
has `max_timestamp() + allowed lateness` at or before the watermark. Merging
(session) windows need a trigger that can merge.
"""

from barrierflow.core.time import MAX_TIMESTAMP
from barrierflow.core.windows.assigners import (
    GlobalWindows,
    MergingWindowAssigner,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)
from barrierflow.core.windows.count_assigners import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
)
from barrierflow.core.windows.serializers import (
    CountWindowSerializer,
    GlobalWindowSerializer,
    TimeWindowSerializer,
)
from barrierflow.core.windows.sessions import (
    DynamicEventTimeSessionWindows,
    DynamicProcessingTimeSessionWindows,
    EventTimeSessionWindows,
    ProcessingTimeSessionWindows,
    SessionWindowTimeGapExtractor,
)
from barrierflow.core.windows.triggers import (
    ContinuousEventTimeTrigger,
    ContinuousProcessingTimeTrigger,
    CountTrigger,
    EventTimeTrigger,
    NeverTrigger,
    ProcessingTimeTrigger,
    PurgingTrigger,
    Trigger,
    TriggerResult,
)
from barrierflow.core.windows.window import CountWindow, GlobalWindow, TimeWindow, Window

__all__ = [
    "MAX_TIMESTAMP",
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountSlidingWindowAssigner",
    "CountTrigger",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "CountWindowSerializer",
    "DynamicEventTimeSessionWindows",
    "DynamicProcessingTimeSessionWindows",
    "EventTimeSessionWindows",
    "EventTimeTrigger",
    "GlobalWindow",
    "GlobalWindowSerializer",
    "GlobalWindows",
    "MergingWindowAssigner",
    "NeverTrigger",
    "ProcessingTimeSessionWindows",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeWindow",
    "TimeWindowSerializer",
    "Trigger",
    "TriggerResult",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
]
