"""AllWindowedStream: `stream.window_all(assigner)`, windows over the whole stream in one
subtask (PyFlink's names: `ProcessAllWindowFunction`, `AllWindowFunction`).

It is a keyed window over one constant key, so the window operator, its state and its
timers are the keyed ones (in every checkpoint), at parallelism 1 as in Flink.

>>> from barrierflow import StreamExecutionEnvironment
>>> from barrierflow.window import TumblingProcessingTimeWindows
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> _ = env.set_parallelism(2)
>>> totals = env.from_collection([1, 2]).window_all(TumblingProcessingTimeWindows.of(1_000))
>>> _ = totals.reduce(lambda a, b: a + b).print()
>>> [(v.name, v.parallelism) for v in env.get_job_graph().vertices]
[('Collection', 2), ('Window(TumblingProcessingTimeWindows, Reduce)', 1), ('Print', 2)]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from barrierflow.api.checkpointed_functions import DelegatedCheckpointing
from barrierflow.core.functions import CheckpointedFunction, Function

if TYPE_CHECKING:
    from barrierflow.api.datastream import DataStream
    from barrierflow.api.windowed_stream import WindowedStream

__all__ = ["AllWindowFunction", "AllWindowedStream", "ProcessAllWindowFunction"]


def _the_only_key(value: Any) -> int:
    return 0


class ProcessAllWindowFunction(Function, ABC):
    """All elements of a window of the whole stream: `process(context, elements)`;
    `context` is a ProcessWindowFunction context (`window()`, `current_watermark()`...)."""

    @abstractmethod
    def process(self, context: Any, elements: Iterable[Any]) -> Iterable[Any] | None: ...

    def clear(self, context: Any) -> None:
        """The window is purged for good."""


class AllWindowFunction(Function, ABC):
    """The older form: `apply(window, inputs)`."""

    @abstractmethod
    def apply(self, window: Any, inputs: Iterable[Any]) -> Iterable[Any] | None: ...


class _Keyless(Function):
    """Runs an all-window function where the window operator expects a keyed one."""

    def __init__(self, function: Any) -> None:
        self.function = function

    def open(self, runtime_context: Any) -> None:
        if isinstance(self.function, Function):
            self.function.open(runtime_context)

    def close(self) -> None:
        if isinstance(self.function, Function):
            self.function.close()


class _KeylessProcess(_Keyless):
    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> Any:
        return self.function.process(context, elements)

    def clear(self, context: Any) -> None:
        clear = getattr(self.function, "clear", None)
        if callable(clear):
            clear(context)


class _KeylessApply(_Keyless):
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Any:
        return self.function.apply(window, inputs)


class _CheckpointedKeylessProcess(_KeylessProcess, DelegatedCheckpointing):
    """A process all-window function that keeps operator list state."""


class _CheckpointedKeylessApply(_KeylessApply, DelegatedCheckpointing):
    """An all-window function (`apply`) that keeps operator list state."""


def _keyless_process(function: Any) -> Any:
    if isinstance(function, CheckpointedFunction):
        return _CheckpointedKeylessProcess(function)
    return _KeylessProcess(function)


def _keyless_apply(function: Any) -> Any:
    if isinstance(function, CheckpointedFunction):
        return _CheckpointedKeylessApply(function)
    return _KeylessApply(function)


def _keyless(function: Any) -> Any:
    if function is None:
        return None
    if callable(getattr(function, "process", None)):
        return _keyless_process(function)
    if callable(getattr(function, "apply", None)):
        return _keyless_apply(function)
    raise TypeError(
        f"an all-window function needs process(context, elements) or apply(window, inputs), "
        f"got {function!r}"
    )


class AllWindowedStream:
    """Windows over all records of a stream; complete it with a window function."""

    def __init__(self, stream: DataStream, assigner: Any) -> None:
        from barrierflow.api.windowed_stream import WindowedStream

        self._windowed: WindowedStream = WindowedStream(stream.key_by(_the_only_key), assigner)

    def trigger(self, trigger: Any) -> AllWindowedStream:
        self._windowed.trigger(trigger)
        return self

    def allowed_lateness(self, time: Any) -> AllWindowedStream:
        self._windowed.allowed_lateness(time)
        return self

    def side_output_late_data(self, output_tag: Any) -> AllWindowedStream:
        self._windowed.side_output_late_data(output_tag)
        return self

    def reduce(
        self, reduce_function: Any, window_function: Any = None, output_type: Any = None
    ) -> DataStream:
        reduced = self._windowed.reduce(reduce_function, _keyless(window_function), output_type)
        return reduced.set_parallelism(1)

    def aggregate(
        self,
        aggregate_function: Any,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        result = self._windowed.aggregate(
            aggregate_function, _keyless(window_function), output_type=output_type
        )
        return result.set_parallelism(1)

    def process(self, process_all_window_function: Any, output_type: Any = None) -> DataStream:
        function = _keyless_process(process_all_window_function)
        return self._windowed.process(function, output_type).set_parallelism(1)

    def apply(self, all_window_function: Any, output_type: Any = None) -> DataStream:
        applied = self._windowed.apply(_keyless_apply(all_window_function), output_type)
        return applied.set_parallelism(1)
