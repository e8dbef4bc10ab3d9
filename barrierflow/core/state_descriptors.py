"""State descriptors: what a user function declares to get a piece of keyed state.

As in PyFlink, a descriptor names the state; the name is what a checkpoint
stores it under, so keep it stable across versions of a job. Type information
is accepted for PyFlink compatibility and not used: values are pickled.

>>> ValueStateDescriptor("count").get_name()
'count'
>>> ListStateDescriptor("seen").kind
<StateKind.LIST: 'list'>
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from barrierflow.core.functions import as_callable
from barrierflow.errors import ConfigurationError


class StateKind(enum.Enum):
    """What shape of state a descriptor declares; stored in snapshots by value."""

    VALUE = "value"
    """One value per key (`ValueState`)."""
    LIST = "list"
    """A list of values per key (`ListState`)."""
    MAP = "map"
    """A dict of user keys to values per key (`MapState`)."""


@dataclass(frozen=True)
class StateDescriptor:
    """Names a piece of keyed state; subclasses fix its kind."""

    name: str
    kind: ClassVar[StateKind]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"a state name must be a non-empty str, got {self.name!r}")

    def get_name(self) -> str:
        """The state's name (PyFlink's `get_name`)."""
        return self.name


@dataclass(frozen=True)
class ValueStateDescriptor(StateDescriptor):
    """Declares a `ValueState`.

    >>> ValueStateDescriptor("total")
    ValueStateDescriptor(name='total', value_type_info=None)
    """

    value_type_info: Any = field(default=None, compare=False)
    kind: ClassVar[StateKind] = StateKind.VALUE


@dataclass(frozen=True)
class ListStateDescriptor(StateDescriptor):
    """Declares a `ListState`.

    >>> ListStateDescriptor("buffer").name
    'buffer'
    """

    elem_type_info: Any = field(default=None, compare=False)
    kind: ClassVar[StateKind] = StateKind.LIST


@dataclass(frozen=True)
class MapStateDescriptor(StateDescriptor):
    """Declares a `MapState`.

    >>> MapStateDescriptor("by_item").kind.value
    'map'
    """

    key_type_info: Any = field(default=None, compare=False)
    value_type_info: Any = field(default=None, compare=False)
    kind: ClassVar[StateKind] = StateKind.MAP


@dataclass(frozen=True)
class ReducingStateDescriptor(StateDescriptor):
    """Declares a `ReducingState` (PyFlink's name); its values fold with `reduce_function`.

    Stored as one value per key and namespace.

    >>> ReducingStateDescriptor("sum", lambda a, b: a + b).name
    'sum'
    """

    reduce_function: Any = field(default=None, compare=False)
    type_info: Any = field(default=None, compare=False)
    kind: ClassVar[StateKind] = StateKind.VALUE

    def __post_init__(self) -> None:
        super().__post_init__()
        as_callable(self.reduce_function, "reduce", "ReduceFunction")

    def reducer(self) -> Callable[[Any, Any], Any]:
        """The reduce function as a two-argument callable."""
        return as_callable(self.reduce_function, "reduce", "ReduceFunction")
