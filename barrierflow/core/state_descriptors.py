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
from barrierflow.core.state_ttl import StateTtlConfig
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
    ttl_config: StateTtlConfig | None = field(default=None, init=False, compare=False, repr=False)
    """Set by `enable_time_to_live`; None: the state never expires."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"a state name must be a non-empty str, got {self.name!r}")

    def get_name(self) -> str:
        """The state's name (PyFlink's `get_name`)."""
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        """Let the state's values expire as `ttl_config` says (PyFlink's name); see
        `barrierflow.state.ttl`. Call it before the state is first asked for.

        >>> from barrierflow.core.time import Time
        >>> descriptor = ValueStateDescriptor("last_seen")
        >>> descriptor.enable_time_to_live(StateTtlConfig.new_builder(Time.hours(1)).build())
        >>> descriptor.ttl_config.get_ttl().to_milliseconds()
        3600000
        """
        if not isinstance(ttl_config, StateTtlConfig):
            raise ConfigurationError(
                f"enable_time_to_live needs a StateTtlConfig (StateTtlConfig.new_builder(ttl)"
                f".build()), got {ttl_config!r:.200}"
            )
        object.__setattr__(self, "ttl_config", ttl_config)

    def time_to_live(self) -> StateTtlConfig | None:
        """The TTL configuration if it is enabled, else None."""
        config = self.ttl_config
        return config if config is not None and config.is_enabled() else None


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

    def get_reduce_function(self) -> Any:
        """The reduce function as given (PyFlink's name)."""
        return self.reduce_function

    def reducer(self) -> Callable[[Any, Any], Any]:
        """The reduce function as a two-argument callable."""
        return as_callable(self.reduce_function, "reduce", "ReduceFunction")


@dataclass(frozen=True)
class AggregatingStateDescriptor(StateDescriptor):
    """Declares an `AggregatingState` (PyFlink's name): values added fold into an
    accumulator with `agg_function` (an `AggregateFunction`: `create_accumulator`, `add`,
    `get_result`); `get()` returns `get_result(accumulator)`.

    Stored as one value per key (and namespace): the accumulator.

    >>> class Count:
    ...     def create_accumulator(self): return 0
    ...     def add(self, value, accumulator): return accumulator + 1
    ...     def get_result(self, accumulator): return accumulator
    ...     def merge(self, a, b): return a + b
    >>> AggregatingStateDescriptor("count", Count()).name
    'count'
    """

    agg_function: Any = field(default=None, compare=False)
    state_type_info: Any = field(default=None, compare=False)
    kind: ClassVar[StateKind] = StateKind.VALUE

    def __post_init__(self) -> None:
        super().__post_init__()
        missing = [
            method
            for method in ("create_accumulator", "add", "get_result")
            if not callable(getattr(self.agg_function, method, None))
        ]
        if missing:
            raise ConfigurationError(
                f"AggregatingStateDescriptor {self.name!r} needs an AggregateFunction "
                f"(create_accumulator, add, get_result); {self.agg_function!r:.200} has no "
                f"{', '.join(missing)}"
            )

    def get_agg_function(self) -> Any:
        """The AggregateFunction (PyFlink's name)."""
        return self.agg_function
