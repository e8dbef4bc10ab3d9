"""Count windows (PyFlink's `CountTumblingWindowAssigner`, `CountSlidingWindowAssigner`):
windows of a key's elements by their number, not their time.

Each assigner numbers a key's elements 0, 1, 2, ... in a value state of that key (read
through the window assigner context's runtime context, so it is checkpointed, restored
and rescaled with the key) and puts element n into `CountWindow`s by that number:

- tumbling, size s: window n // s; it fires once it holds s elements.
- sliding, size s, slide d: every window k with k*d <= n <= k*d + s - 1; each fires
  once it holds its s elements, so the first result comes after s elements and one
  follows every d elements, over the last s.

That is PyFlink's behaviour (its `KeyedStream.count_window`). Java Flink's
`countWindow(size, slide)` is built on GlobalWindows with a count evictor and also
emits the partial windows of the first `size - slide` elements; this does not. A window
that fired never gets another element, so the default trigger, `CountTrigger(size)`
inside a `PurgingTrigger`, drops its contents as it fires: the results are PyFlink's,
without keeping every fired window's elements forever as PyFlink does.

>>> CountTumblingWindowAssigner.of(3), CountSlidingWindowAssigner.of(4, 2)
(CountTumblingWindowAssigner(3), CountSlidingWindowAssigner(4, 2))
>>> sliding_window_ids(4, 2, 5)
[2, 1]
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.state_descriptors import ValueStateDescriptor
from barrierflow.core.windows.assigners import WindowAssigner
from barrierflow.core.windows.triggers import CountTrigger, PurgingTrigger, Trigger
from barrierflow.core.windows.window import CountWindow
from barrierflow.errors import ConfigurationError

__all__ = ["CountSlidingWindowAssigner", "CountTumblingWindowAssigner", "sliding_window_ids"]


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(f"a count window's {what} must be a positive int, got {value!r}")
    return value


def _next_number(context: Any, descriptor: ValueStateDescriptor) -> int:
    """The number of this element among its key's (0 first), counted in keyed state."""
    runtime_context = None if context is None else context.get_runtime_context()
    if runtime_context is None:
        raise ConfigurationError(
            "count windows count each key's elements in keyed state: use them on a keyed "
            "stream (key_by(...).count_window(size))"
        )
    count = runtime_context.get_state(descriptor)
    number = count.value() or 0
    count.update(number + 1)
    return number


def sliding_window_ids(window_size: int, window_slide: int, number: int) -> list[int]:
    """The ids of the sliding count windows element `number` belongs to, latest first
    (PyFlink's CountSlidingWindowAssigner): window k holds elements k*slide up to
    k*slide + size - 1."""
    last_id = number // window_slide
    start = last_id * window_slide
    ids = []
    while last_id >= 0 and start <= number <= start + window_size - 1:
        ids.append(last_id)
        last_id -= 1
        start -= window_slide
    return ids


class CountTumblingWindowAssigner(WindowAssigner):
    """Back-to-back windows of `window_size` elements per key."""

    def __init__(self, window_size: int) -> None:
        self._window_size = _positive(window_size, "size")
        self._count_descriptor = ValueStateDescriptor("tumble-count-assigner")

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[CountWindow]:
        return [CountWindow(_next_number(context, self._count_descriptor) // self._window_size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger.of(CountTrigger.of(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self._window_size})"


class CountSlidingWindowAssigner(WindowAssigner):
    """Windows of `window_size` elements per key, one starting every `window_slide`."""

    def __init__(self, window_size: int, window_slide: int) -> None:
        self._window_size = _positive(window_size, "size")
        self._window_slide = _positive(window_slide, "slide")
        self._count_descriptor = ValueStateDescriptor("slide-count-assigner")

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: int, context: Any) -> list[CountWindow]:
        number = _next_number(context, self._count_descriptor)
        return [
            CountWindow(i)
            for i in sliding_window_ids(self._window_size, self._window_slide, number)
        ]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger.of(CountTrigger.of(self._window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self._window_size}, {self._window_slide})"
