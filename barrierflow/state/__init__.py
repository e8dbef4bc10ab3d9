"""Keyed state for user functions, with PyFlink's names.

>>> from barrierflow.state import ValueStateDescriptor
>>> ValueStateDescriptor("count").name
'count'
"""

from barrierflow.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.state.values import ListState, MapState, State, ValueState

from barrierflow.runtime.windowing.partitioned_state import (  # isort: skip (after values)
    ReducingState,
    ReducingStateDescriptor,
)

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
