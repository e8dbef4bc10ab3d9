"""WindowedStream: `keyed.window(assigner)`, then a window function (PyFlink's names).

>>> from barrierflow import Duration, StreamExecutionEnvironment, WatermarkStrategy
>>> from barrierflow.window import TumblingEventTimeWindows
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
...     lambda value, record_timestamp: value[1]
... )
>>> sums = (
...     env.from_collection([("a", 1), ("a", 2)])
...     .assign_timestamps_and_watermarks(strategy)
...     .key_by(lambda value: value[0])
...     .window(TumblingEventTimeWindows.of(Duration.of_seconds(10)))
...     .reduce(lambda a, b: (a[0], a[1] + b[1]))
... )
>>> _ = sums.print()
>>> [v.name for v in env.get_job_graph().vertices]
['Collection -> Timestamps/Watermarks', 'Window(TumblingEventTimeWindows, Reduce) -> Print']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from barrierflow.api.checkpointed_functions import one_checkpointed
from barrierflow.core.functions import as_callable
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.time import Duration, to_millis
from barrierflow.core.window_functions import AggregateFunction
from barrierflow.errors import ConfigurationError, JobDefinitionError
from barrierflow.runtime.operators.window import WindowOperator

if TYPE_CHECKING:
    from barrierflow.api.datastream import DataStream, KeyedStream

__all__ = ["WindowedStream"]


class WindowedStream:
    """A keyed stream cut into windows by `assigner`; a window function completes it.

    Results carry the window's `max_timestamp()` (end - 1). With
    `side_output_late_data(tag)`, records too late for every window they belong to go
    to `result.get_side_output(tag)`; without it they are dropped.
    """

    def __init__(self, keyed_stream: KeyedStream, assigner: Any) -> None:
        if not callable(getattr(assigner, "assign_windows", None)):
            raise JobDefinitionError(f"window() needs a WindowAssigner, got {assigner!r}")
        self._keyed_stream = keyed_stream
        self._assigner = assigner
        self._trigger: Any = None
        self._allowed_lateness = 0
        self._late_data_tag: OutputTag | None = None

    def trigger(self, trigger: Any) -> WindowedStream:
        """Fire windows with `trigger` instead of the assigner's default trigger."""
        if self._assigner.is_merging() and not trigger.can_merge():
            raise ConfigurationError(
                f"A merging window assigner cannot be used with a trigger that does not "
                f"support merging ({trigger!r})."
            )
        self._trigger = trigger
        return self

    def allowed_lateness(self, time: int | Duration) -> WindowedStream:
        """Keep event-time windows this long (ms or Duration) after the watermark passed
        their end; a late record fires the window again."""
        millis = to_millis(time, "allowed_lateness")
        if millis < 0:
            raise ConfigurationError(f"allowed_lateness must be >= 0 ms, got {millis}")
        self._allowed_lateness = millis
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        """Send records that come too late for all their windows to `output_tag`."""
        if not isinstance(output_tag, OutputTag):
            raise JobDefinitionError(
                f"side_output_late_data needs an OutputTag, got {output_tag!r}"
            )
        self._late_data_tag = output_tag
        return self

    def evictor(self, evictor: Any) -> WindowedStream:
        raise ConfigurationError("evictors are not supported yet")

    # ---- window functions ------------------------------------------------------------------

    def reduce(
        self, reduce_function: Any, window_function: Any = None, output_type: Any = None
    ) -> DataStream:
        """Reduce each window incrementally; with `window_function` (a ProcessWindowFunction
        or WindowFunction) the reduced value is handed to it when the window fires."""
        as_callable(reduce_function, "reduce", "ReduceFunction")
        reduced = self._add("Reduce", ("reduce", reduce_function, window_function))
        return reduced._declare(output_type or self._keyed_stream._declared_type, "reduce")

    def aggregate(
        self,
        aggregate_function: AggregateFunction,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        """Aggregate each window incrementally with an AggregateFunction (optionally
        followed by a window function that sees the one aggregate)."""
        if not isinstance(aggregate_function, AggregateFunction):
            raise JobDefinitionError(
                f"aggregate() needs an AggregateFunction, got {aggregate_function!r}"
            )
        aggregated = self._add("Aggregate", ("aggregate", aggregate_function, window_function))
        return aggregated._declare(output_type, "aggregate")

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        """Hand all elements of a window to `process_window_function.process(key, context,
        elements)` when it fires."""
        if not callable(getattr(process_window_function, "process", None)):
            raise JobDefinitionError(
                f"process() needs a ProcessWindowFunction, got {process_window_function!r}"
            )
        return self._add("Process", ("process", process_window_function, None))._declare(
            output_type, "process"
        )

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        """Hand all elements of a window to `window_function.apply(key, window, inputs)`."""
        if not callable(getattr(window_function, "apply", None)) and not callable(window_function):
            raise JobDefinitionError(f"apply() needs a WindowFunction, got {window_function!r}")
        return self._add("Apply", ("process", window_function, None))._declare(output_type, "apply")

    def _add(self, kind: str, contents: tuple[str, Any, Any]) -> DataStream:
        one_checkpointed(contents[1:], "window")
        stream = self._keyed_stream
        name = f"Window({type(self._assigner).__name__}, {kind})"
        result = stream._add_operator(
            name,
            WindowOperator,
            stream._key_selector,
            self._assigner,
            contents,
            self._trigger,
            self._allowed_lateness,
            self._late_data_tag,
        )
        return result
