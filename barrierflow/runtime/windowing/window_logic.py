"""The window operator's logic without a runtime (the core of Flink's WindowOperator).

Mailbox thread only. `WindowLogic` takes one event per call (an element, an
event-time timer, a processing-time timer) and returns what it emits: window
results and late elements. Everything it remembers lives in the two protocols
it is given, `WindowStateAccess` and `WindowTimerAccess`; it owns no clock (the
caller passes the watermark and the processing time) and no output.

What the caller must do (the window operator):

1. For each record: `process_element(key, value, timestamp, watermark, processing_time)`.
2. When the timer service fires a timer registered through the `timers` given
   here: `on_event_time(key, window, time, watermark, processing_time)` or
   `on_processing_time(...)`. Timers registered while firing may be due at once.
3. Emit each `WindowResult` on the main output with its timestamp, and each
   `LateElement` to the late-data side output.

>>> from barrierflow.runtime.windowing.window_contents import ReducingWindowContents
>>> from barrierflow.runtime.windowing.window_state import InMemoryWindowState
>>> from barrierflow.runtime.windowing.window_timers import InMemoryWindowTimers
>>> from barrierflow.core.windows.assigners import TumblingEventTimeWindows
>>> timers = InMemoryWindowTimers()
>>> logic = WindowLogic(
...     TumblingEventTimeWindows.of(10), ReducingWindowContents(lambda a, b: a + b),
...     InMemoryWindowState(), timers, side_output_late_data=True)
>>> logic.process_element("k", 1, 3, watermark=0) + logic.process_element("k", 2, 7, watermark=0)
[]
>>> timer = timers.poll_event_time_timer(10)
>>> logic.on_event_time(timer.key, timer.window, timer.timestamp, watermark=10)
[WindowResult(value=3, timestamp=9, window=TimeWindow(start=0, end=10))]
>>> logic.process_element("k", 5, 4, watermark=10)
[LateElement(value=5, timestamp=4)]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from barrierflow.core.time import MAX_TIMESTAMP, Duration, to_millis
from barrierflow.core.window_functions import KeyedStateStore, ProcessWindowFunction
from barrierflow.core.windows.assigners import WindowAssigner
from barrierflow.core.windows.triggers import Trigger
from barrierflow.core.windows.window import Window
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.windowing.merging_window_set import MergingWindowSet
from barrierflow.runtime.windowing.partitioned_state import (
    WindowKeyedStateStore,
    merge_namespaces,
    merge_values,
    partitioned_state,
)
from barrierflow.runtime.windowing.window_contents import WindowContents
from barrierflow.runtime.windowing.window_state import WindowStateAccess
from barrierflow.runtime.windowing.window_timers import WindowTimerAccess

__all__ = [
    "CONTENTS_STATE",
    "MERGING_WINDOWS_STATE",
    "LateElement",
    "WindowLogic",
    "WindowResult",
]

CONTENTS_STATE = "window-contents"
"""State name of the windows' contents, per (key, state window)."""

MERGING_WINDOWS_STATE = "merging-window-set"
"""State name of the merging-window set, per (key, None): a list of (window, state window)."""


@dataclass(frozen=True, slots=True)
class WindowResult:
    """One result of firing `window`, emitted with `timestamp` = `window.max_timestamp()`."""

    value: Any
    timestamp: int
    window: Window


@dataclass(frozen=True, slots=True)
class LateElement:
    """An element no window took because it came too late: for the late-data side output."""

    value: Any
    timestamp: int


Emitted = list[WindowResult | LateElement]
"""What one call emits, in order."""


def _require_processing_time(processing_time: int | None) -> int:
    if processing_time is None:
        raise ConfigurationError(
            "the current processing time is needed here (processing-time windows or triggers, "
            "or current_processing_time()), but the caller passed none"
        )
    return processing_time


class _AssignerContext:
    """`WindowAssigner.WindowAssignerContext`: the processing time of the current call."""

    __slots__ = ("processing_time", "runtime_context")

    def __init__(self) -> None:
        self.processing_time: int | None = None
        self.runtime_context: Any = None

    def get_current_processing_time(self) -> int:
        return _require_processing_time(self.processing_time)

    def get_runtime_context(self) -> Any:
        return self.runtime_context


class _TriggerContext:
    """`Trigger.OnMergeContext` for the current key and window (Flink's WindowOperator.Context).

    Timers and state go to (key, window); the contents of a merged window live
    in its state window, but trigger state and timers follow the window itself.
    """

    __slots__ = (
        "_state",
        "_timers",
        "key",
        "merged_windows",
        "processing_time",
        "watermark",
        "window",
    )

    def __init__(self, state: WindowStateAccess, timers: WindowTimerAccess) -> None:
        self._state = state
        self._timers = timers
        self.key: Hashable = None
        self.window: Window | None = None
        self.merged_windows: Sequence[Window] = ()
        self.watermark = 0
        self.processing_time: int | None = None

    def get_current_watermark(self) -> int:
        return self.watermark

    def get_current_processing_time(self) -> int:
        return _require_processing_time(self.processing_time)

    def get_metric_group(self) -> Any:
        raise NotImplementedError("barrierflow has no metric groups yet")

    def register_event_time_timer(self, time: int) -> None:
        self._timers.register_event_time_timer(self.key, self.window, time)

    def register_processing_time_timer(self, time: int) -> None:
        self._timers.register_processing_time_timer(self.key, self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._timers.delete_event_time_timer(self.key, self.window, time)

    def delete_processing_time_timer(self, time: int) -> None:
        self._timers.delete_processing_time_timer(self.key, self.window, time)

    def get_partitioned_state(self, state_descriptor: Any) -> Any:
        return partitioned_state(self._state, state_descriptor, self.key, self.window)

    def merge_partitioned_state(self, state_descriptor: Any) -> None:
        if self.merged_windows:
            merge_namespaces(
                self._state, state_descriptor, self.key, self.window, self.merged_windows
            )


class _ProcessContext(ProcessWindowFunction.Context):
    """What a ProcessWindowFunction sees while its window fires or is cleared."""

    __slots__ = ("_merging", "_state", "key", "processing_time", "watermark", "window_")

    def __init__(self, state: WindowStateAccess, merging: bool) -> None:
        self._state = state
        self._merging = merging
        self.key: Hashable = None
        self.window_: Window | None = None
        self.watermark = 0
        self.processing_time: int | None = None

    def window(self) -> Window | None:
        return self.window_

    def current_processing_time(self) -> int:
        return _require_processing_time(self.processing_time)

    def current_watermark(self) -> int:
        return self.watermark

    def window_state(self) -> KeyedStateStore:
        if self._merging:
            raise ConfigurationError("Per-window state is not allowed when using merging windows.")
        return WindowKeyedStateStore(self._state, self.key, self.window_)

    def global_state(self) -> KeyedStateStore:
        return WindowKeyedStateStore(self._state, self.key, None)


class WindowLogic:
    """Flink's WindowOperator semantics over injected state and timers.

    Guarantees: an element goes into every window the assigner gives it whose
    cleanup time (event time: `max_timestamp() + allowed_lateness`) is after the
    watermark; the trigger decides each firing and purge; a window's contents,
    trigger state and timers are all removed at its cleanup time; an element no
    window took that is itself late (`timestamp + allowed_lateness <= watermark`,
    event time only) is returned as a `LateElement` when `side_output_late_data`
    is set, else dropped and counted in `num_late_records_dropped`.
    Assumes the watermark passed to each call never decreases and that timers
    fire once the watermark (or clock) reaches them, as the timer service does.
    """

    def __init__(
        self,
        assigner: WindowAssigner,
        contents: WindowContents,
        state: WindowStateAccess,
        timers: WindowTimerAccess,
        *,
        trigger: Trigger | None = None,
        allowed_lateness: int | Duration = 0,
        side_output_late_data: bool = False,
    ) -> None:
        lateness = to_millis(allowed_lateness, "allowed_lateness")
        if lateness < 0:
            raise ConfigurationError(f"allowed lateness cannot be negative, got {lateness} ms")
        self.assigner = assigner
        self.trigger = assigner.get_default_trigger() if trigger is None else trigger
        self.allowed_lateness = lateness
        self.side_output_late_data = side_output_late_data
        self.num_late_records_dropped = 0
        """Late elements dropped because `side_output_late_data` is not set (Flink's metric)."""
        self._contents = contents
        self._state = state
        self._timers = timers
        self._event_time: bool = assigner.is_event_time()
        self._merging: bool = assigner.is_merging()
        if self._merging and not self.trigger.can_merge():
            raise ConfigurationError(
                "A merging window assigner cannot be used with a trigger that does not support "
                f"merging ({self.trigger!r})."
            )
        self._assigner_context = _AssignerContext()
        self._trigger_context = _TriggerContext(state, timers)
        self._process_context = _ProcessContext(state, self._merging)

    # ---- life cycle -----------------------------------------------------------------------

    def open(self, runtime_context: Any) -> None:
        """Open the user's functions; assigners see `runtime_context` from now on."""
        self._assigner_context.runtime_context = runtime_context
        self._contents.open(runtime_context)

    def close(self) -> None:
        """Close the user's functions."""
        self._contents.close()

    # ---- events ---------------------------------------------------------------------------

    def process_element(
        self,
        key: Hashable,
        value: Any,
        timestamp: int,
        watermark: int,
        processing_time: int | None = None,
    ) -> Emitted:
        """Add one element of `key` (Flink's WindowOperator.processElement)."""
        self._set_times(watermark, processing_time)
        windows = self.assigner.assign_windows(value, timestamp, self._assigner_context)
        out: Emitted = []
        skipped = True
        if self._merging:
            merging_windows = self._merging_window_set(key)

            def merge(
                merge_result: Window,
                merged_windows: list[Window],
                state_window_result: Window,
                merged_state_windows: list[Window],
            ) -> None:
                self._on_merge(
                    key, merge_result, merged_windows, state_window_result, merged_state_windows
                )

            for window in windows:
                # Adding the window may merge it: then it ended up in the merge result.
                actual_window = merging_windows.add_window(window, merge)
                if self._is_window_late(actual_window):
                    merging_windows.retire_window(actual_window)
                    continue
                skipped = False
                state_window = merging_windows.get_state_window(actual_window)
                if state_window is None:
                    raise RuntimeError(f"Window {window} is not in in-flight window set.")
                self._add_and_trigger(key, value, timestamp, actual_window, state_window, out)
            self._persist(key, merging_windows)
        else:
            for window in windows:
                if self._is_window_late(window):
                    continue
                skipped = False
                self._add_and_trigger(key, value, timestamp, window, window, out)

        if skipped and self._is_element_late(timestamp):
            if self.side_output_late_data:
                out.append(LateElement(value, timestamp))
            else:
                self.num_late_records_dropped += 1
        return out

    def on_event_time(
        self,
        key: Hashable,
        window: Window,
        time: int,
        watermark: int,
        processing_time: int | None = None,
    ) -> Emitted:
        """An event-time timer of (`key`, `window`) fired at `time` (the watermark reached it)."""
        return self._on_timer(key, window, time, watermark, processing_time, event_time=True)

    def on_processing_time(
        self,
        key: Hashable,
        window: Window,
        time: int,
        watermark: int,
        processing_time: int | None = None,
    ) -> Emitted:
        """A processing-time timer of (`key`, `window`) fired at `time`.

        `processing_time` is the clock's reading now; it defaults to `time`.
        """
        now = time if processing_time is None else processing_time
        return self._on_timer(key, window, time, watermark, now, event_time=False)

    # ---- the steps ------------------------------------------------------------------------

    def _set_times(self, watermark: int, processing_time: int | None) -> None:
        self._trigger_context.watermark = watermark
        self._trigger_context.processing_time = processing_time
        self._process_context.watermark = watermark
        self._process_context.processing_time = processing_time
        self._assigner_context.processing_time = processing_time

    def _add_and_trigger(
        self,
        key: Hashable,
        value: Any,
        timestamp: int,
        window: Window,
        state_window: Window,
        out: Emitted,
    ) -> None:
        state = self._state
        contents = self._contents.add(state.get(CONTENTS_STATE, key, state_window), value)
        self._put_contents(key, state_window, contents)

        context = self._trigger_context
        context.key = key
        context.window = window
        result = self.trigger.on_element(value, timestamp, window, context)

        if result.is_fire():
            contents = state.get(CONTENTS_STATE, key, state_window)
            if contents is None:
                return  # as Flink: nothing to emit, and no cleanup timer either
            self._emit(key, window, contents, out)
        if result.is_purge():
            state.remove(CONTENTS_STATE, key, state_window)
        self._register_cleanup_timer(key, window)

    def _on_timer(
        self,
        key: Hashable,
        window: Window,
        time: int,
        watermark: int,
        processing_time: int | None,
        *,
        event_time: bool,
    ) -> Emitted:
        self._set_times(watermark, processing_time)
        merging_windows = None
        state_window = window
        if self._merging:
            merging_windows = self._merging_window_set(key)
            state_window = merging_windows.get_state_window(window)
            if state_window is None:
                # A timer of a window that is gone (its trigger left a timer behind); its
                # state is cleared already, so there is nothing to do.
                return []

        context = self._trigger_context
        context.key = key
        context.window = window
        if event_time:
            result = self.trigger.on_event_time(time, window, context)
        else:
            result = self.trigger.on_processing_time(time, window, context)

        out: Emitted = []
        if result.is_fire():
            contents = self._state.get(CONTENTS_STATE, key, state_window)
            if contents is not None:
                self._emit(key, window, contents, out)
        if result.is_purge():
            self._state.remove(CONTENTS_STATE, key, state_window)

        if event_time == self._event_time and time == self._cleanup_time(window):
            self._clear_all_state(key, window, state_window, merging_windows)
        if merging_windows is not None:
            self._persist(key, merging_windows)
        return out

    def _on_merge(
        self,
        key: Hashable,
        merge_result: Window,
        merged_windows: list[Window],
        state_window_result: Window,
        merged_state_windows: list[Window],
    ) -> None:
        """The merging-window set merged `merged_windows` into `merge_result`."""
        context = self._trigger_context
        if self._event_time:
            if merge_result.max_timestamp() + self.allowed_lateness <= context.watermark:
                raise ConfigurationError(
                    "The end timestamp of an event-time window cannot become earlier than the "
                    f"current watermark by merging. Current watermark: {context.watermark} "
                    f"window: {merge_result}"
                )
        else:
            now = _require_processing_time(context.processing_time)
            if merge_result.max_timestamp() <= now:
                raise ConfigurationError(
                    "The end timestamp of a processing-time window cannot become earlier than "
                    f"the current processing time by merging. Current processing time: {now} "
                    f"window: {merge_result}"
                )

        context.key = key
        context.window = merge_result
        context.merged_windows = merged_windows
        try:
            self.trigger.on_merge(merge_result, context)
        finally:
            context.merged_windows = ()

        for merged_window in merged_windows:
            context.window = merged_window
            self.trigger.clear(merged_window, context)
            self._delete_cleanup_timer(key, merged_window)

        merge_values(
            self._state,
            CONTENTS_STATE,
            self._contents.merge,
            key,
            state_window_result,
            merged_state_windows,
        )

    def _emit(self, key: Hashable, window: Window, contents: Any, out: Emitted) -> None:
        context = self._process_context
        context.key = key
        context.window_ = window
        timestamp = window.max_timestamp()
        for value in self._contents.emit(key, window, contents, context):
            out.append(WindowResult(value, timestamp, window))

    def _clear_all_state(
        self,
        key: Hashable,
        window: Window,
        state_window: Window,
        merging_windows: MergingWindowSet | None,
    ) -> None:
        self._state.remove(CONTENTS_STATE, key, state_window)
        context = self._trigger_context
        context.key = key
        context.window = window
        self.trigger.clear(window, context)
        process_context = self._process_context
        process_context.key = key
        process_context.window_ = window
        self._contents.clear(process_context)
        if merging_windows is not None:
            merging_windows.retire_window(window)

    def _put_contents(self, key: Hashable, state_window: Window, contents: Any) -> None:
        if contents is None:
            self._state.remove(CONTENTS_STATE, key, state_window)
        else:
            self._state.put(CONTENTS_STATE, key, state_window, contents)

    # ---- the merging-window set -----------------------------------------------------------

    def _merging_window_set(self, key: Hashable) -> MergingWindowSet:
        return MergingWindowSet(self.assigner, self._state.get(MERGING_WINDOWS_STATE, key, None))

    def _persist(self, key: Hashable, merging_windows: MergingWindowSet) -> None:
        if not merging_windows.changed():
            return
        if len(merging_windows):
            self._state.put(MERGING_WINDOWS_STATE, key, None, merging_windows.snapshot())
        else:
            self._state.remove(MERGING_WINDOWS_STATE, key, None)

    # ---- lateness and cleanup -------------------------------------------------------------

    def _cleanup_time(self, window: Window) -> int:
        """When the window's state goes: event time `max_timestamp + allowed lateness`
        (capped at the end of time), processing time `max_timestamp`."""
        if self._event_time:
            return min(window.max_timestamp() + self.allowed_lateness, MAX_TIMESTAMP)
        return window.max_timestamp()

    def _is_window_late(self, window: Window) -> bool:
        return self._event_time and self._cleanup_time(window) <= self._trigger_context.watermark

    def _is_element_late(self, timestamp: int) -> bool:
        return (
            self._event_time
            and timestamp + self.allowed_lateness <= self._trigger_context.watermark
        )

    def _register_cleanup_timer(self, key: Hashable, window: Window) -> None:
        cleanup_time = self._cleanup_time(window)
        if cleanup_time == MAX_TIMESTAMP:
            return  # no timer for the end of time
        if self._event_time:
            self._timers.register_event_time_timer(key, window, cleanup_time)
        else:
            self._timers.register_processing_time_timer(key, window, cleanup_time)

    def _delete_cleanup_timer(self, key: Hashable, window: Window) -> None:
        cleanup_time = self._cleanup_time(window)
        if cleanup_time == MAX_TIMESTAMP:
            return
        if self._event_time:
            self._timers.delete_event_time_timer(key, window, cleanup_time)
        else:
            self._timers.delete_processing_time_timer(key, window, cleanup_time)
