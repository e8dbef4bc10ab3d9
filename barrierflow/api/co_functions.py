"""Re-exports `barrierflow.core.co_functions`, its home below every layer that uses it."""

from barrierflow.core.co_functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    KeyedCoProcessFunction,
)

__all__ = [
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "KeyedCoProcessFunction",
]
