"""User function classes, with PyFlink's names. Plain callables work wherever a
function object is accepted."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from types import GenericAlias
from typing import Any

from barrierflow.core.metrics import MetricGroup


class RuntimeContext(ABC):
    """What a function sees of the subtask it runs in."""

    @abstractmethod
    def get_index_of_this_subtask(self) -> int: ...

    @abstractmethod
    def get_number_of_parallel_subtasks(self) -> int: ...

    @abstractmethod
    def get_attempt_number(self) -> int: ...

    def get_job_parameter(self, key: str, default_value: str) -> str:
        """The global job parameter `key` (`env.get_config().set_global_job_parameters`, or
        the configuration's `pipeline.global-job-parameters`), else `default_value`."""
        raise NotImplementedError

    @abstractmethod
    def get_state(self, descriptor: Any) -> Any:
        """Keyed `ValueState` for a `ValueStateDescriptor` (keyed streams only)."""

    def get_list_state(self, descriptor: Any) -> Any:
        """Keyed `ListState` for a `ListStateDescriptor` (keyed streams only)."""
        raise NotImplementedError

    def get_map_state(self, descriptor: Any) -> Any:
        """Keyed `MapState` for a `MapStateDescriptor` (keyed streams only)."""
        raise NotImplementedError

    def get_reducing_state(self, descriptor: Any) -> Any:
        """Keyed `ReducingState` for a `ReducingStateDescriptor` (keyed streams only)."""
        raise NotImplementedError

    def get_aggregating_state(self, descriptor: Any) -> Any:
        """Keyed `AggregatingState` for an `AggregatingStateDescriptor` (keyed streams
        only): values added fold into the AggregateFunction's accumulator."""
        raise NotImplementedError

    def get_metrics_group(self) -> MetricGroup:
        """Where this function registers its metrics (`counter`, `gauge`, `meter`,
        `distribution`, as in PyFlink); they are reported with the task's own metrics and
        served at the JobMaster's `/metrics`. Update them from the function's calls only
        (the task's thread), not from threads of its own."""
        raise NotImplementedError


class Function:
    """Base of function classes: `open`/`close` bracket the function's life in a task."""

    __class_getitem__ = classmethod(GenericAlias)  # generic in PyFlink: Foo[IN, OUT]

    def open(self, runtime_context: RuntimeContext) -> None:
        """Called once before the first record (after state is restored)."""

    def close(self) -> None:
        """Called once when the task ends normally."""


class MapFunction(Function, ABC):
    @abstractmethod
    def map(self, value: Any) -> Any: ...


class FlatMapFunction(Function, ABC):
    @abstractmethod
    def flat_map(self, value: Any) -> Iterable[Any]: ...


class FilterFunction(Function, ABC):
    @abstractmethod
    def filter(self, value: Any) -> bool: ...


class ReduceFunction(Function, ABC):
    @abstractmethod
    def reduce(self, value1: Any, value2: Any) -> Any: ...


class KeySelector(Function, ABC):
    @abstractmethod
    def get_key(self, value: Any) -> Any: ...


class Partitioner(Function, ABC):
    """Picks the subtask of a record's key (`DataStream.partition_custom`), from 0 to
    `num_partitions - 1`."""

    @abstractmethod
    def partition(self, key: Any, num_partitions: int) -> int: ...


class SourceFunction(Function):
    """PyFlink's SourceFunction: a wrapper of a Java source (a legacy connector). barrierflow
    runs no Java code, so `env.add_source` refuses it when the job is defined, naming it;
    its sources are `barrierflow.connectors` Sources (`from_source`, `add_source`)."""

    def __init__(self, source_func: Any = None) -> None:
        self.source_func = source_func


class SinkFunction(Function):
    """PyFlink's SinkFunction: a wrapper of a Java sink. `DataStream.add_sink` refuses it,
    naming it; barrierflow's sinks are `barrierflow.connectors` Sinks (`sink_to`)."""

    def __init__(self, sink_func: Any = None) -> None:
        self.sink_func = sink_func


class TimeDomain(enum.Enum):
    """Which clock fired a timer (PyFlink's `TimeDomain`)."""

    EVENT_TIME = 0
    """The watermark passed the timer's timestamp."""
    PROCESSING_TIME = 1
    """The task's wall clock passed the timer's timestamp."""


class TimerService(ABC):
    """Timers and clocks of the current key (PyFlink's `TimerService`).

    Timestamps are epoch milliseconds. A timer is registered at most once per key and
    timestamp; it is part of every checkpoint.
    """

    @abstractmethod
    def current_processing_time(self) -> int:
        """The task's wall-clock time in milliseconds."""

    @abstractmethod
    def current_watermark(self) -> int:
        """The operator's current event time (`-2**63` before the first watermark)."""

    @abstractmethod
    def register_processing_time_timer(self, timestamp: int) -> None:
        """Call `on_timer` once the wall clock reaches `timestamp`."""

    @abstractmethod
    def register_event_time_timer(self, timestamp: int) -> None:
        """Call `on_timer` once the watermark reaches `timestamp`."""

    @abstractmethod
    def delete_processing_time_timer(self, timestamp: int) -> None:
        """Forget a processing-time timer of the current key (no-op if there is none)."""

    @abstractmethod
    def delete_event_time_timer(self, timestamp: int) -> None:
        """Forget an event-time timer of the current key (no-op if there is none)."""


class ProcessFunction(Function, ABC):
    """Processes each record, with its timestamp, side outputs and the clocks.

    `process_element` returns or yields its outputs (or returns None for none); an
    output `(output_tag, value)` goes to that side output, as in PyFlink, and so does
    `ctx.output(output_tag, value)`. Timers need a keyed stream (`KeyedProcessFunction`).
    """

    class Context(ABC):
        @abstractmethod
        def timestamp(self) -> int | None:
            """The event timestamp of the current record (None if it has none)."""

        @abstractmethod
        def timer_service(self) -> TimerService: ...

        @abstractmethod
        def output(self, output_tag: Any, value: Any) -> None:
            """Emit `value` to the side output `output_tag`."""

    @abstractmethod
    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any] | None: ...


class KeyedProcessFunction(Function, ABC):
    """Processes each record of a keyed stream with keyed state and timers.

    `process_element` and `on_timer` return or yield their outputs (or return None for
    none); an output `(output_tag, value)` goes to that side output (PyFlink's way),
    and so does `ctx.output(output_tag, value)`. Outputs of `process_element` carry the
    record's timestamp; outputs of an event-time `on_timer` carry the timer's
    timestamp, those of a processing-time one carry none (as in Flink).
    """

    class Context(ABC):
        @abstractmethod
        def get_current_key(self) -> Any: ...

        def timestamp(self) -> int | None:
            """The event timestamp of the current record or timer (None if none)."""
            raise NotImplementedError

        def timer_service(self) -> TimerService:
            raise NotImplementedError

        def output(self, output_tag: Any, value: Any) -> None:
            """Emit `value` to the side output `output_tag`."""
            raise NotImplementedError

    class OnTimerContext(Context):
        @abstractmethod
        def time_domain(self) -> TimeDomain:
            """Whether the watermark or the wall clock fired the timer."""

    @abstractmethod
    def process_element(
        self, value: Any, ctx: KeyedProcessFunction.Context
    ) -> Iterable[Any] | None: ...

    def on_timer(
        self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext
    ) -> Iterable[Any] | None:
        """A timer registered for the current key fired at `timestamp`."""


class OperatorStateStore(ABC):
    """Operator (non-keyed) state of one user function in one subtask: named lists.

    Each list is part of every checkpoint. When a job resumes at another parallelism,
    `get_list_state` lists are split evenly over the new subtasks, and every new subtask
    gets all elements of a `get_union_list_state` list. Elements may be any picklable
    value. The state name is what a checkpoint stores the list under: keep it stable.
    """

    @abstractmethod
    def get_list_state(self, state_descriptor: Any) -> Any:
        """The `barrierflow.state.ListState` named by a `ListStateDescriptor`, redistributed
        by even split: the old subtasks' elements, in old-subtask order, cut into
        contiguous parts of near-equal size, one per new subtask (each subtask keeps its
        own elements when the parallelism is unchanged)."""

    @abstractmethod
    def get_union_list_state(self, state_descriptor: Any) -> Any:
        """The `barrierflow.state.ListState` named by a `ListStateDescriptor`, redistributed
        by union: on restore every subtask gets the elements of every old subtask."""


class FunctionInitializationContext(ABC):
    """What `CheckpointedFunction.initialize_state` is given."""

    @abstractmethod
    def is_restored(self) -> bool:
        """True when the job resumed from a checkpoint or savepoint holding state of this
        operator; False on a fresh start."""

    @abstractmethod
    def get_operator_state_store(self) -> OperatorStateStore:
        """The function's operator state, restored and redistributed when `is_restored()`."""


class FunctionSnapshotContext(ABC):
    """What `CheckpointedFunction.snapshot_state` is given."""

    @abstractmethod
    def get_checkpoint_id(self) -> int:
        """The id of the checkpoint (or savepoint) being taken."""


class CheckpointedFunction(ABC):
    """A user function with its own operator state (Flink's `CheckpointedFunction`).

    Mix it into a map, flat_map, filter, reduce or (keyed) process function, a
    co-process, co_map or co_flat_map function, or a window function (one per window).
    Async I/O, join and co-group functions cannot host it: such a job is refused.
    `initialize_state` runs once in each subtask, before `open`, and gets the state
    from `context.get_operator_state_store()`; `snapshot_state` runs on the task's
    thread at every checkpoint barrier and brings the lists up to date (what they
    hold then is what the checkpoint stores). Exactly-once: after a failure, or a
    restart at another parallelism, the lists hold what they held at the last
    completed checkpoint, redistributed over the subtasks.

    >>> from barrierflow.functions import CheckpointedFunction, MapFunction
    >>> from barrierflow.state import ListStateDescriptor
    >>> class CountingMap(MapFunction, CheckpointedFunction):
    ...     \"\"\"Numbers the records each subtask saw, across restarts.\"\"\"
    ...     def initialize_state(self, context):
    ...         self.state = context.get_operator_state_store().get_list_state(
    ...             ListStateDescriptor("seen"))
    ...         self.seen = sum(self.state.get())
    ...     def snapshot_state(self, context):
    ...         self.state.update([self.seen])
    ...     def map(self, value):
    ...         self.seen += 1
    ...         return value, self.seen
    >>> isinstance(CountingMap(), CheckpointedFunction)
    True

    Used in a job as any map function: `stream.map(CountingMap())`. After a restore at
    another parallelism each subtask sums the counts it was given, so the total over
    all subtasks carries on where it stood.
    """

    @abstractmethod
    def snapshot_state(self, context: FunctionSnapshotContext) -> None:
        """At a checkpoint barrier: write what must survive into the operator state."""

    @abstractmethod
    def initialize_state(self, context: FunctionInitializationContext) -> None:
        """Before `open`: get the operator state (restored, when `is_restored()`)."""


def as_callable(function: Any, method: str, kind: str) -> Callable[..., Any]:
    """The callable behind a function object (its `method`) or a plain callable."""
    bound = getattr(function, method, None)
    if callable(bound) and isinstance(function, Function):
        return bound
    if callable(function):
        return function
    raise TypeError(
        f"{kind} must be a callable or a {kind} object with .{method}(), got {function!r}"
    )
