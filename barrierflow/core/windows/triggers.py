"""Triggers, with PyFlink's names and Flink's semantics (public as `barrierflow.window`).

A trigger decides, per key and window, when the window is evaluated (FIRE) and
when its contents are dropped (PURGE), from the elements it sees and the timers
it registers. It holds no state in its own fields: state goes through
`ctx.get_partitioned_state`, scoped to the current key and window.

>>> trigger = PurgingTrigger.of(CountTrigger.of(100))
>>> trigger, trigger.can_merge()
(PurgingTrigger(CountTrigger(100)), True)
"""

from __future__ import annotations

import enum
import operator
from abc import ABC, abstractmethod
from types import GenericAlias
from typing import Any

from barrierflow.core.state_descriptors import ReducingStateDescriptor, StateDescriptor
from barrierflow.core.time import Duration, to_millis
from barrierflow.core.windows.window import Window
from barrierflow.errors import ConfigurationError

__all__ = [
    "ContinuousEventTimeTrigger",
    "ContinuousProcessingTimeTrigger",
    "CountTrigger",
    "EventTimeTrigger",
    "NeverTrigger",
    "ProcessingTimeTrigger",
    "PurgingTrigger",
    "Trigger",
    "TriggerResult",
]


class TriggerResult(enum.Enum):
    """What a trigger decides for a window: evaluate it (fire), drop its contents (purge)."""

    CONTINUE = (False, False)
    """Do nothing."""
    FIRE_AND_PURGE = (True, True)
    """Evaluate the window, then drop its contents."""
    FIRE = (True, False)
    """Evaluate the window and keep its contents."""
    PURGE = (False, True)
    """Drop the window's contents without evaluating them."""

    def is_fire(self) -> bool:
        """Whether the window is evaluated."""
        return self._value_[0]

    def is_purge(self) -> bool:
        """Whether the window's contents are dropped."""
        return self._value_[1]


class Trigger(ABC):
    """Decides, per window, when to evaluate it and when to drop its contents.

    Each method gets the window and a context to register timers and to reach
    state scoped to the current key and window. A trigger holds no state in its
    own fields (one instance serves every key and window). `clear` must delete
    the timers and state it created; it runs when the window is purged for good.
    """

    __class_getitem__ = classmethod(GenericAlias)  # generic in PyFlink: Foo[IN, OUT]

    class TriggerContext(ABC):
        """What a trigger can do: timers and state of the current key and window."""

        @abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abstractmethod
        def get_current_watermark(self) -> int: ...

        @abstractmethod
        def register_processing_time_timer(self, time: int) -> None:
            """`on_processing_time(time, window, ...)` once the clock reaches `time`."""

        @abstractmethod
        def register_event_time_timer(self, time: int) -> None:
            """`on_event_time(time, window, ...)` once the watermark reaches `time`."""

        @abstractmethod
        def delete_processing_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def delete_event_time_timer(self, time: int) -> None: ...

        @abstractmethod
        def get_partitioned_state(self, state_descriptor: StateDescriptor) -> Any:
            """State scoped to the current key and window (value, list, map or reducing)."""

    class OnMergeContext(TriggerContext):
        """The context of `on_merge`: it can also merge state of the merged windows."""

        @abstractmethod
        def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
            """Fold the merged windows' state of `state_descriptor` into the new window's."""

    @abstractmethod
    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        """Called for every element added to `window`."""

    @abstractmethod
    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        """Called when a processing-time timer of `window` fires."""

    @abstractmethod
    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        """Called when an event-time timer of `window` fires."""

    def can_merge(self) -> bool:
        """Whether the trigger supports merging windows (then it implements `on_merge`)."""
        return False

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        """Called when windows merged into `window`: re-register timers, merge state."""
        raise ConfigurationError("This trigger does not support merging.")

    @abstractmethod
    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        """Delete the timers and state this trigger holds for `window`."""


class EventTimeTrigger(Trigger):
    """Fires once the watermark passes the window's end (the event-time default).

    An element for a window the watermark already passed (allowed lateness) fires
    at once.
    """

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        # Only if the watermark has not passed the merged window's end: else the timer would
        # fire at once, and the window fires anyway with the next element (or never).
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "EventTimeTrigger()"


class ProcessingTimeTrigger(Trigger):
    """Fires when the clock reaches the window's end (the processing-time default)."""

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.FIRE

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "ProcessingTimeTrigger()"


class CountTrigger(Trigger):
    """Fires every `count` elements of a window (the count lives in the window's state)."""

    def __init__(self, window_size: int) -> None:
        if isinstance(window_size, bool) or not isinstance(window_size, int):
            raise ConfigurationError(f"CountTrigger needs an int count, got {window_size!r}")
        self.count = window_size
        self._state = ReducingStateDescriptor("count", operator.add)

    @staticmethod
    def of(window_size: int) -> CountTrigger:
        """PyFlink's argument name: fire every `window_size` elements."""
        return CountTrigger(window_size)

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        count = ctx.get_partitioned_state(self._state)
        count.add(1)
        if count.get() >= self.count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.get_partitioned_state(self._state).clear()

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._state)

    def __repr__(self) -> str:
        return f"CountTrigger({self.count})"


class PurgingTrigger(Trigger):
    """Turns every FIRE of the trigger it wraps into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger) -> None:
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        self.nested_trigger.clear(window, ctx)

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


class _ContinuousTrigger(Trigger):
    """What the two continuous triggers share: the next fire time, in a reducing state (so
    merged windows keep the earliest), and its timer in the trigger's own time domain."""

    def __init__(self, interval: int | Duration) -> None:
        name = type(self).__name__
        self.interval = to_millis(interval, f"{name} interval")
        if self.interval <= 0:
            raise ConfigurationError(f"{name} needs a positive interval, got {self.interval} ms")
        self._state = ReducingStateDescriptor("fire-time", min)

    def _register_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _delete_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        raise NotImplementedError

    def _fire_if_due(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self._state)
        if fire_time.get() == time:
            fire_time.clear()
            self._register_next_fire_time(time, window, ctx, fire_time)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        fire_time = ctx.get_partitioned_state(self._state)
        time = fire_time.get()
        if time is not None:
            self._delete_timer(ctx, time)
            fire_time.clear()

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._state)
        next_fire_time = ctx.get_partitioned_state(self._state).get()
        if next_fire_time is not None:
            self._register_timer(ctx, next_fire_time)

    def _register_next_fire_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext, fire_time: Any
    ) -> None:
        next_fire_time = min(time + self.interval, window.max_timestamp())
        fire_time.add(next_fire_time)
        self._register_timer(ctx, next_fire_time)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.interval})"


class ContinuousEventTimeTrigger(_ContinuousTrigger):
    """Fires every `interval` of event time within the window, and at the window's end."""

    @staticmethod
    def of(interval: int | Duration) -> ContinuousEventTimeTrigger:
        return ContinuousEventTimeTrigger(interval)

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        fire_time = ctx.get_partitioned_state(self._state)
        if fire_time.get() is None:
            # Java's remainder (truncating toward zero), as in Flink.
            self._register_next_fire_time(
                timestamp - _java_remainder(timestamp, self.interval), window, ctx, fire_time
            )
        return TriggerResult.CONTINUE

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        return self._fire_if_due(time, window, ctx)

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def _register_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.register_event_time_timer(time)

    def _delete_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.delete_event_time_timer(time)


class ContinuousProcessingTimeTrigger(_ContinuousTrigger):
    """Fires every `interval` of processing time (aligned to multiples of it), as Flink's
    and PyFlink's; the window's end is fired by the last aligned time, capped at its end."""

    @staticmethod
    def of(interval: int | Duration) -> ContinuousProcessingTimeTrigger:
        return ContinuousProcessingTimeTrigger(interval)

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        fire_time = ctx.get_partitioned_state(self._state)
        if fire_time.get() is None:
            now = ctx.get_current_processing_time()
            self._register_next_fire_time(now - now % self.interval, window, ctx, fire_time)
        return TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return self._fire_if_due(time, window, ctx)

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def _register_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.register_processing_time_timer(time)

    def _delete_timer(self, ctx: Trigger.TriggerContext, time: int) -> None:
        ctx.delete_processing_time_timer(time)


def _java_remainder(dividend: int, divisor: int) -> int:
    """Java's `dividend % divisor`: the sign of the dividend."""
    remainder = abs(dividend) % abs(divisor)
    return -remainder if dividend < 0 else remainder


class NeverTrigger(Trigger):
    """Never fires: the default trigger of `GlobalWindows` (pair it with a custom trigger)."""

    def on_element(
        self, element: Any, timestamp: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(
        self, time: int, window: Window, ctx: Trigger.TriggerContext
    ) -> TriggerResult:
        return TriggerResult.CONTINUE

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        pass

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        pass

    def __repr__(self) -> str:
        return "NeverTrigger()"
