"""The window harness: `WindowOperator` (assigner, trigger, window function, allowed
lateness, late side output) as `key_by(...).window(...)...` runs it."""

from __future__ import annotations

from typing import Any

from barrierflow.core.functions import as_callable
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.time import Duration, to_millis
from barrierflow.core.window_functions import AggregateFunction
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.operators.window import WindowOperator
from barrierflow.testing._keyed import UID, KeyedHarness, built


def _contents(
    reduce_function: Any, aggregate_function: Any, window_function: Any
) -> tuple[str, Any, Any]:
    """The operator's ("reduce" | "aggregate" | "process", function, window function)."""
    if reduce_function is not None and aggregate_function is not None:
        raise ConfigurationError("give reduce_function or aggregate_function, not both")
    if reduce_function is not None:
        as_callable(reduce_function, "reduce", "ReduceFunction")
        return ("reduce", reduce_function, window_function)
    if aggregate_function is not None:
        if not isinstance(aggregate_function, AggregateFunction):
            raise ConfigurationError(
                f"aggregate_function needs an AggregateFunction, got {aggregate_function!r:.200}"
            )
        return ("aggregate", aggregate_function, window_function)
    if window_function is None:
        raise ConfigurationError(
            "a window needs reduce_function, aggregate_function or window_function"
        )
    if not callable(getattr(window_function, "process", None)) and not callable(
        getattr(window_function, "apply", window_function)
    ):
        raise ConfigurationError(
            f"window_function needs a ProcessWindowFunction or WindowFunction, "
            f"got {window_function!r:.200}"
        )
    return ("process", window_function, None)


class WindowOperatorHarness(KeyedHarness):
    """Drives a keyed window: `key_by(key_selector).window(assigner)`, optionally
    `.trigger(trigger)`, `.allowed_lateness(ms)`, `.side_output_late_data(tag)`, and then
    `.reduce(reduce_function, window_function)`, `.aggregate(aggregate_function,
    window_function)` or `.process(window_function)` / `.apply(window_function)`.

    Results carry the window's `max_timestamp()`. Records too late for every window go to
    `late_data_tag`'s side output (or are counted in `num_late_records_dropped`).

    >>> from barrierflow import OutputTag
    >>> from barrierflow.window import TumblingEventTimeWindows
    >>> LATE = OutputTag("late")
    >>> harness = WindowOperatorHarness(
    ...     TumblingEventTimeWindows.of(10), lambda r: r[0],
    ...     reduce_function=lambda a, b: (a[0], a[1] + b[1]),
    ...     allowed_lateness=5, late_data_tag=LATE)
    >>> harness.process_element(("a", 1), 1); harness.process_element(("a", 2), 8)
    >>> harness.process_watermark(9)
    >>> harness.take_output()
    [('record', ('a', 3), 9), ('watermark', 9)]
    >>> harness.process_element(("a", 4), 2)  # late, within the allowed lateness: fires again
    >>> harness.extract_output_records()
    [(('a', 7), 9)]
    >>> harness.process_watermark(15); harness.process_element(("a", 8), 3)  # too late
    >>> harness.get_side_output(LATE)
    [('a', 8)]
    """

    operator: WindowOperator

    def __init__(
        self,
        assigner: Any,
        key_selector: Any,
        *,
        reduce_function: Any = None,
        aggregate_function: Any = None,
        window_function: Any = None,
        trigger: Any = None,
        allowed_lateness: int | Duration = 0,
        late_data_tag: OutputTag | None = None,
        **settings: Any,
    ) -> None:
        if not callable(getattr(assigner, "assign_windows", None)):
            raise ConfigurationError(f"a window needs a WindowAssigner, got {assigner!r:.200}")
        if trigger is not None and assigner.is_merging() and not trigger.can_merge():
            raise ConfigurationError(
                f"A merging window assigner cannot be used with a trigger that does not "
                f"support merging ({trigger!r})."
            )
        lateness = to_millis(allowed_lateness, "allowed_lateness")
        if lateness < 0:
            raise ConfigurationError(f"allowed_lateness must be >= 0 ms, got {lateness}")
        if late_data_tag is not None and not isinstance(late_data_tag, OutputTag):
            raise ConfigurationError(f"late_data_tag needs an OutputTag, got {late_data_tag!r}")
        contents = _contents(reduce_function, aggregate_function, window_function)
        function = next(f for f in contents[1:] if f is not None)
        name = f"Window({type(assigner).__name__}, {contents[0]})"
        operator = built(
            WindowOperator,
            UID,
            name,
            key_selector,
            assigner,
            contents,
            trigger,
            lateness,
            late_data_tag,
        )
        self._get_key = as_callable(key_selector, "get_key", "KeySelector")
        super().__init__(operator, function, **settings)

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """One record (with its event time in ms, or None) into its windows."""
        operator = self.operator
        self._keyed_push(operator.process_batch, self._get_key, value, timestamp, "the element")

    @property
    def num_late_records_dropped(self) -> int:
        """Late records dropped because no late-data side output is set (Flink's metric)."""
        return self.operator.num_late_records_dropped

    def window_timers(self, key: Any) -> list[tuple[int, Any]]:
        """`key`'s event-time and processing-time timers as (timestamp, window), in firing
        order per time domain (event time first)."""
        self.check_key(key)
        service = self.operator.timer_service
        assert service is not None
        return [(t.timestamp, t.namespace) for t in service.event_time_timers(key)] + [
            (t.timestamp, t.namespace) for t in service.processing_time_timers(key)
        ]
