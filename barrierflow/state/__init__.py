"""Keyed state and operator state for user functions, with PyFlink's names (operator
state through `barrierflow.functions.CheckpointedFunction`), and state TTL
(`StateTtlConfig`, `descriptor.enable_time_to_live(...)`).

>>> from barrierflow.state import ValueStateDescriptor
>>> ValueStateDescriptor("count").name
'count'
"""

from barrierflow.core.functions import OperatorStateStore
from barrierflow.core.state_ttl import StateTtlConfig
from barrierflow.core.time import Time  # noqa: F401 (older path: barrierflow.Time)
from barrierflow.state.broadcast_state import BroadcastState, ReadOnlyBroadcastState
from barrierflow.state.descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from barrierflow.state.values import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    State,
    ValueState,
)

__all__ = [
    "AggregatingState",
    "AggregatingStateDescriptor",
    "BroadcastState",
    "ListState",
    "ListStateDescriptor",
    "MapState",
    "MapStateDescriptor",
    "OperatorStateStore",
    "ReadOnlyBroadcastState",
    "ReducingState",
    "ReducingStateDescriptor",
    "State",
    "StateDescriptor",
    "StateTtlConfig",
    "ValueState",
    "ValueStateDescriptor",
]
