"""WindowOperator: `WindowLogic` (runtime/windowing) over a keyed operator's backend and timers.

Mailbox thread only. The window contents, trigger state and merging-window sets live
in the keyed state backend (one MapState per state name, keyed by window), and the
windows' timers in the operator's InternalTimerService (the window is the timer's
namespace), so both are cut per key group in every checkpoint and rescale like any
keyed state. A window function that is a `CheckpointedFunction` (the reduce, aggregate
or window function; one per operator) keeps operator list state. Results leave with
timestamp `window.max_timestamp()`; late records go to the late-data side output when
one is set, else they are dropped.
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import CheckpointedFunction
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.windows.assigners import WindowAssigner
from barrierflow.core.windows.triggers import Trigger
from barrierflow.core.windows.window import Window
from barrierflow.runtime.batch import NO_TIMESTAMP, RecordBatch
from barrierflow.runtime.operators.keyed import KeyedOperator
from barrierflow.runtime.timers import Timer
from barrierflow.runtime.windowing import (
    AggregatingWindowContents,
    LateElement,
    ListWindowContents,
    ReducingWindowContents,
    WindowLogic,
)
from barrierflow.state import MapStateDescriptor
from barrierflow.state.backend import KeyedStateBackend

__all__ = ["BackendWindowState", "WindowOperator", "make_window_contents"]


def make_window_contents(kind: str, function: Any, window_function: Any = None) -> Any:
    """A fresh WindowContents: `kind` "reduce", "aggregate" or "process"."""
    if kind == "reduce":
        return ReducingWindowContents(function, window_function)
    if kind == "aggregate":
        return AggregatingWindowContents(function, window_function)
    if kind == "process":
        return ListWindowContents(function)
    raise ValueError(f"unknown window contents kind {kind!r}")


class BackendWindowState:
    """A `WindowStateAccess` over the operator's keyed backend (any `KeyedStateBackend`):
    MapState `name`, entry `namespace` (the window), as `state/backend.py` stores namespaces.

    Mailbox thread only; switches the backend's current key on every access.
    """

    def __init__(self, backend: KeyedStateBackend) -> None:
        self._backend = backend
        self._maps: dict[str, Any] = {}

    def _map(self, name: str, key: Any) -> Any:
        self._backend.set_current_key(key)
        state = self._maps.get(name)
        if state is None:
            state = self._maps[name] = self._backend.get_map_state(MapStateDescriptor(name))
        return state

    def get(self, name: str, key: Any, namespace: Window | None) -> Any:
        return self._map(name, key).get(namespace)

    def put(self, name: str, key: Any, namespace: Window | None, value: Any) -> None:
        self._map(name, key).put(namespace, value)

    def remove(self, name: str, key: Any, namespace: Window | None) -> None:
        self._map(name, key).remove(namespace)


class WindowOperator(KeyedOperator):
    """Windows per key (Flink's WindowOperator): assign, trigger, fire, clean up.

    `contents` is ("reduce" | "aggregate" | "process", function, window_function): each
    subtask builds its own `WindowContents` from it. `trigger` None means the assigner's
    default; `late_data_tag` is an OutputTag or None.
    """

    def __init__(
        self,
        uid: str,
        name: str,
        key_selector: Any,
        assigner: WindowAssigner,
        contents: tuple[str, Any, Any],
        trigger: Trigger | None = None,
        allowed_lateness: int = 0,
        late_data_tag: OutputTag | None = None,
    ) -> None:
        super().__init__(uid, name, key_selector)
        self.assigner = assigner
        self.contents = contents
        self.trigger = trigger
        self.allowed_lateness = allowed_lateness
        self.late_data_tag = late_data_tag
        self.logic: WindowLogic | None = None

    def user_function(self) -> Any:
        """The window's function that is a `CheckpointedFunction` (the API allows one)."""
        for function in self.contents[1:]:
            if isinstance(function, CheckpointedFunction):
                return function
        return None

    def open(self) -> None:
        assert self.backend is not None and self.timer_service is not None
        self.logic = WindowLogic(
            self.assigner,
            make_window_contents(*self.contents),
            BackendWindowState(self.backend),
            self.timer_service,
            trigger=self.trigger,
            allowed_lateness=self.allowed_lateness,
            side_output_late_data=self.late_data_tag is not None,
        )
        self._out_values: list[Any] = []
        self._out_stamps: list[int] = []
        self._late_values: list[Any] = []
        self._late_stamps: list[int] = []
        self.logic.open(self.runtime_context())

    @property
    def num_late_records_dropped(self) -> int:
        """Late records dropped because no late-data side output is set (Flink's metric)."""
        return 0 if self.logic is None else self.logic.num_late_records_dropped

    def _now(self) -> int | None:
        context = self.context
        assert context is not None
        try:
            return context.processing_time()
        except RuntimeError:
            return None

    def process_batch(self, batch: RecordBatch) -> None:
        logic, get_key, service = self.logic, self._get_key, self.timer_service
        assert logic is not None and service is not None and self.backend is not None
        watermark = service.current_watermark
        now = self._now()
        process = logic.process_element
        # The assigner may keep keyed state of the record's key (count windows count there).
        set_key = self.backend.set_current_key
        timestamps = batch.timestamps or [NO_TIMESTAMP] * len(batch.values)
        for value, timestamp in zip(batch.values, timestamps, strict=True):
            stamp = None if timestamp == NO_TIMESTAMP else timestamp
            key = get_key(value)
            set_key(key)
            self._collect(process(key, value, stamp, watermark, now))
        self.flush_timer_outputs()

    def on_event_time(self, timer: Timer) -> None:
        assert self.logic is not None and self.timer_service is not None
        watermark = self.timer_service.current_watermark
        now = self._now()
        self._collect(
            self.logic.on_event_time(timer.key, timer.namespace, timer.timestamp, watermark, now)
        )

    def on_processing_time_timer(self, timer: Timer) -> None:
        assert self.logic is not None and self.timer_service is not None
        watermark = self.timer_service.current_watermark
        self._collect(
            self.logic.on_processing_time(
                timer.key, timer.namespace, timer.timestamp, watermark, self._now()
            )
        )

    def _collect(self, emitted: list[Any]) -> None:
        for item in emitted:
            if type(item) is LateElement:
                self._late_values.append(item.value)
                self._late_stamps.append(item.timestamp)
            else:
                self._out_values.append(item.value)
                self._out_stamps.append(item.timestamp)

    def flush_timer_outputs(self) -> None:
        if self._out_values:
            batch = RecordBatch(self._out_values, self._out_stamps)
            self._out_values, self._out_stamps = [], []
            self.output.collect(batch)
        if self._late_values:
            batch = RecordBatch(self._late_values, self._late_stamps)
            self._late_values, self._late_stamps = [], []
            self.output.collect_side(self.late_data_tag.tag_id, batch)

    def close(self) -> None:
        try:
            if self.logic is not None:
                self.logic.close()
        finally:
            super().close()
