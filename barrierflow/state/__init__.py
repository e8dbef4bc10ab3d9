"""Keyed state and operator state for user functions, with PyFlink's names (operator
state through `barrierflow.functions.CheckpointedFunction`).

>>> from barrierflow.state import ValueStateDescriptor
>>> ValueStateDescriptor("count").name
'count'
"""

from barrierflow.core.functions import OperatorStateStore
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
    "OperatorStateStore",
    "ReducingState",
    "ReducingStateDescriptor",
    "State",
    "StateDescriptor",
    "ValueState",
    "ValueStateDescriptor",
]
