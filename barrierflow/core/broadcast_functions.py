"""Functions over a stream connected with a broadcast stream, with PyFlink's names:
`BroadcastProcessFunction` (non-keyed) and `KeyedBroadcastProcessFunction`.

`process_broadcast_element(value, ctx)` sees every element of the broadcast stream on
every subtask and may change the broadcast state (`ctx.get_broadcast_state(descriptor)`,
a `barrierflow.state.BroadcastState`); `process_element(value, ctx)` sees this subtask's
share of the other stream and may only read it. Outputs are returned or yielded, as in a
`ProcessFunction`; `(output_tag, value)` or `ctx.output(output_tag, value)` goes to a side
output. The keyed variant adds keyed state and timers to `process_element` and
`on_timer`, and `ctx.apply_to_keyed_state(descriptor, function)` to the broadcast side
(Flink's Java `applyToKeyedState`, which PyFlink lacks): `function(key, state)` for every
key of this subtask with a value in that state. `process_broadcast_element` has no current
key: reach keyed state there only through `apply_to_keyed_state`.

Write the same to the broadcast state on every subtask (decide from the broadcast
element alone, not from keyed state or the subtask): a restore at another parallelism
gives each new subtask one old subtask's copy.

Generic as in PyFlink (`KeyedBroadcastProcessFunction[str, Event, Rule, str]`), through
`Function`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from barrierflow.core.functions import Function, TimeDomain, TimerService

__all__ = [
    "BaseBroadcastProcessFunction",
    "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction",
]


class BaseBroadcastProcessFunction(Function):
    """What both broadcast process functions share: their contexts."""

    class BaseContext(ABC):
        """Available in every method: the element's timestamp and the clocks."""

        @abstractmethod
        def timestamp(self) -> int | None:
            """The timestamp of the current element or timer (None if it has none)."""

        @abstractmethod
        def current_processing_time(self) -> int: ...

        @abstractmethod
        def current_watermark(self) -> int: ...

        def output(self, output_tag: Any, value: Any) -> None:
            """Emit `value` to the side output `output_tag`."""
            raise NotImplementedError

    class Context(BaseContext):
        """The broadcast side's context: the broadcast state, writable."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            """The `BroadcastState` of a `MapStateDescriptor` given to `broadcast(...)`."""

    class ReadOnlyContext(BaseContext):
        """The other side's context: the broadcast state, read-only."""

        @abstractmethod
        def get_broadcast_state(self, state_descriptor: Any) -> Any:
            """The `ReadOnlyBroadcastState` of a `MapStateDescriptor` given to `broadcast`."""


class BroadcastProcessFunction(BaseBroadcastProcessFunction):
    """A non-keyed stream connected with a broadcast stream (`stream.connect(broadcast)`)."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        """The broadcast side's context."""

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        """The non-broadcast side's context."""

    @abstractmethod
    def process_element(self, value: Any, ctx: ReadOnlyContext) -> Iterable[Any] | None:
        """An element of the non-broadcast stream; the broadcast state is read-only."""

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: Context) -> Iterable[Any] | None:
        """An element of the broadcast stream (every subtask sees each one)."""


class KeyedBroadcastProcessFunction(BaseBroadcastProcessFunction):
    """A keyed stream connected with a broadcast stream (`keyed.connect(broadcast)`):
    `process_element` and `on_timer` also have keyed state and timers."""

    class Context(BaseBroadcastProcessFunction.Context, ABC):
        """The broadcast side's context: no current key, but every key's state."""

        def apply_to_keyed_state(
            self, state_descriptor: Any, function: Callable[[Any, Any], None]
        ) -> None:
            """`function(key, state)` for every key of this subtask with a value in the
            keyed state `state_descriptor` (the state scoped to that key)."""
            raise NotImplementedError

    class ReadOnlyContext(BaseBroadcastProcessFunction.ReadOnlyContext, ABC):
        """The keyed side's context: its key, timers, the broadcast state read-only."""

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def get_current_key(self) -> Any: ...

    class OnTimerContext(ReadOnlyContext, ABC):
        """The context of `on_timer`."""

        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """Whether the watermark or the wall clock fired the timer."""

    @abstractmethod
    def process_element(self, value: Any, ctx: ReadOnlyContext) -> Iterable[Any] | None:
        """An element of the keyed stream; the current key is its key."""

    @abstractmethod
    def process_broadcast_element(self, value: Any, ctx: Context) -> Iterable[Any] | None:
        """An element of the broadcast stream (every subtask sees each one)."""

    def on_timer(self, timestamp: int, ctx: OnTimerContext) -> Iterable[Any] | None:
        """A timer registered for the current key fired at `timestamp`."""
