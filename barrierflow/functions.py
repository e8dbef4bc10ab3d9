"""User function classes (PyFlink names)."""

from barrierflow.api.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ReduceFunction,
    RuntimeContext,
)

__all__ = [
    "FilterFunction",
    "FlatMapFunction",
    "KeySelector",
    "KeyedProcessFunction",
    "MapFunction",
    "ReduceFunction",
    "RuntimeContext",
]
