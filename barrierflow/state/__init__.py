"""Keyed state for user functions, with PyFlink's names.

>>> from barrierflow.state import ValueStateDescriptor
>>> ValueStateDescriptor("count").name
'count'
"""

from barrierflow.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.state.values import ListState, MapState, ReducingState, State, ValueState

__all__ = [
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "ReducingState",
    "ReducingStateDescriptor",
    "State",
    "StateDescriptor",
    "ValueState",
    "ValueStateDescriptor",
]
