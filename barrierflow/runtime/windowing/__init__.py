"""Windowing as pure logic: Flink's WindowOperator core, the merging-window set, and the
two protocols (keyed window state, timers) a window operator backs it with.

- `window_logic.WindowLogic`: elements and timers in, window results and late elements out.
- `window_contents`: the window function kinds (reduce, aggregate, process).
- `merging_window_set.MergingWindowSet`: in-flight session windows of one key.
- `window_state` / `window_timers`: the protocols and their in-memory twins.
- `partitioned_state`: state handles per (key, window) for triggers and process functions.

The windows, assigners and triggers it runs are the window model of `barrierflow/core/windows/`
(public as `barrierflow.window`); AggregateFunction, ProcessWindowFunction and WindowFunction
come from `barrierflow/core/window_functions.py` (public as `barrierflow.functions`).
"""

from barrierflow.core.window_functions import (
    AggregateFunction,
    KeyedStateStore,
    ProcessWindowFunction,
    WindowFunction,
)
from barrierflow.runtime.windowing.merging_window_set import MergingWindowSet
from barrierflow.runtime.windowing.partitioned_state import (
    ReducingState,
    ReducingStateDescriptor,
    WindowKeyedStateStore,
)
from barrierflow.runtime.windowing.window_contents import (
    AggregatingWindowContents,
    ListWindowContents,
    ReducingWindowContents,
    WindowContents,
)
from barrierflow.runtime.windowing.window_logic import LateElement, WindowLogic, WindowResult
from barrierflow.runtime.windowing.window_state import InMemoryWindowState, WindowStateAccess
from barrierflow.runtime.windowing.window_timers import (
    InMemoryWindowTimers,
    WindowTimer,
    WindowTimerAccess,
)

__all__ = [
    "AggregateFunction",
    "AggregatingWindowContents",
    "InMemoryWindowState",
    "InMemoryWindowTimers",
    "KeyedStateStore",
    "LateElement",
    "ListWindowContents",
    "MergingWindowSet",
    "ProcessWindowFunction",
    "ReducingState",
    "ReducingStateDescriptor",
    "ReducingWindowContents",
    "WindowContents",
    "WindowFunction",
    "WindowKeyedStateStore",
    "WindowLogic",
    "WindowResult",
    "WindowStateAccess",
    "WindowTimer",
    "WindowTimerAccess",
]
