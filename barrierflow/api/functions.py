"""Re-exports `barrierflow.core.functions`, its home below every layer that uses it."""

from barrierflow.core.functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    TimeDomain,
    TimerService,
    as_callable,
)

__all__ = [
    "FilterFunction",
    "FlatMapFunction",
    "Function",
    "KeySelector",
    "KeyedProcessFunction",
    "MapFunction",
    "ProcessFunction",
    "ReduceFunction",
    "RuntimeContext",
    "TimeDomain",
    "TimerService",
    "as_callable",
]
