"""State descriptors as `barrierflow.state` exports them; defined in `barrierflow.core`, where
the function contracts that take them live."""

from barrierflow.core.state_descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateKind,
    ValueStateDescriptor,
)

__all__ = [
    "ListStateDescriptor",
    "MapStateDescriptor",
    "ReducingStateDescriptor",
    "StateDescriptor",
    "StateKind",
    "ValueStateDescriptor",
]
