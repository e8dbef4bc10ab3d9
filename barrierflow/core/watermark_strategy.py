"""Watermark strategies: how a source assigns event timestamps and generates watermarks.

The names are PyFlink's (and Flink's, for the generator interfaces PyFlink lacks).

Preparation: pick a strategy and tell it where a record's event time is.

>>> from barrierflow import Duration, WatermarkStrategy
>>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(
...     Duration.of_seconds(5)
... ).with_timestamp_assigner(lambda event, record_timestamp: event["ts"])

Running: the source creates one watermark generator per split. It feeds the generator
every record with its timestamp (`on_event`) and asks it for a watermark every
`auto_watermark_interval` (`on_periodic_emit`); the source's watermark is the minimum
over its splits.

>>> from unittest.mock import Mock
>>> output = Mock(spec=WatermarkOutput)
>>> assigner = strategy.create_timestamp_assigner()
>>> generator = strategy.create_watermark_generator()
>>> for event in [{"ts": 10_000}, {"ts": 12_000}, {"ts": 11_000}]:
...     generator.on_event(event, assigner.extract_timestamp(event, 0), output)
>>> generator.on_periodic_emit(output)
>>> output.method_calls
[call.emit_watermark(Watermark(timestamp=6999))]

Caveats: a split that stops receiving records holds every downstream watermark back
unless the strategy has `with_idleness`. Strategies are shipped to the Spark tasks with
cloudpickle, so whatever they hold (assigners, generator suppliers) must pickle.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from barrierflow.core.time import Duration, to_millis
from barrierflow.core.watermark import Watermark

__all__ = [
    "AscendingTimestampsWatermarks",
    "BoundedOutOfOrdernessWatermarks",
    "Clock",
    "NoWatermarksGenerator",
    "RecordTimestampAssigner",
    "TimestampAssigner",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
    "WatermarksWithIdleness",
    "monotonic_millis",
]

Clock: TypeAlias = Callable[[], int]
"""A source of time in milliseconds; only differences between two readings matter."""


def monotonic_millis() -> int:
    """The default `Clock`: the process's monotonic clock in milliseconds.

    >>> monotonic_millis() <= monotonic_millis()
    True
    """
    return time.monotonic_ns() // 1_000_000


# --- Timestamps ----------------------------------------------------------------------


class TimestampAssigner(ABC):
    """Extracts an event timestamp (epoch milliseconds) from a record.

    >>> class FromField(TimestampAssigner):
    ...     def extract_timestamp(self, value, record_timestamp):
    ...         return value["ts"]
    >>> FromField().extract_timestamp({"ts": 42}, 0)
    42
    """

    @abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """The event time of `value`; `record_timestamp` is the one it already had, if any."""


class RecordTimestampAssigner(TimestampAssigner):
    """Keeps the timestamp a record already has: the default when no assigner is given.

    >>> RecordTimestampAssigner().extract_timestamp("a record", 1_700_000_000_000)
    1700000000000
    """

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return record_timestamp


class _FunctionTimestampAssigner(TimestampAssigner):
    """A plain `(value, record_timestamp) -> int` callable used as a `TimestampAssigner`."""

    def __init__(self, function: Callable[[Any, int], int]) -> None:
        self.function = function

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self.function(value, record_timestamp)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _FunctionTimestampAssigner) and other.function == self.function

    def __hash__(self) -> int:
        return hash(self.function)

    def __repr__(self) -> str:
        return f"TimestampAssigner({self.function!r})"


# --- Generators ----------------------------------------------------------------------


class WatermarkOutput(ABC):
    """Where a `WatermarkGenerator` sends its watermarks and idleness (Flink's interface).

    The source gives each split's generator its own output and combines them.
    """

    @abstractmethod
    def emit_watermark(self, watermark: Watermark) -> None:
        """Emit a watermark; this also ends a previous `mark_idle`."""

    @abstractmethod
    def mark_idle(self) -> None:
        """The stream has no data for now: it stops holding back the watermark."""

    @abstractmethod
    def mark_active(self) -> None:
        """The stream has data again after `mark_idle`."""


class WatermarkGenerator(ABC):
    """Generates watermarks from the events of one split, by event or periodically.

    Mailbox thread only. A punctuated generator emits in `on_event`; a periodic one
    remembers what it saw and emits in `on_periodic_emit`.

    >>> from unittest.mock import Mock
    >>> class EveryTenth(WatermarkGenerator):
    ...     def on_event(self, event, event_timestamp, output):
    ...         if event_timestamp % 10 == 0:
    ...             output.emit_watermark(Watermark(event_timestamp))
    ...     def on_periodic_emit(self, output):
    ...         pass
    >>> output = Mock(spec=WatermarkOutput)
    >>> for timestamp in [7, 10, 13]:
    ...     EveryTenth().on_event("event", timestamp, output)
    >>> output.method_calls
    [call.emit_watermark(Watermark(timestamp=10))]
    """

    @abstractmethod
    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        """Called for every record, with the timestamp the assigner gave it."""

    @abstractmethod
    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        """Called every `auto_watermark_interval`; may emit a watermark."""


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Assumes events arrive at most `max_out_of_orderness` later than a newer event.

    Periodically emits the greatest timestamp seen so far minus the bound minus 1 ms (as
    Flink does), so an event exactly `max_out_of_orderness` late is still on time.
    Emits nothing before the first event.

    >>> from unittest.mock import Mock
    >>> generator = BoundedOutOfOrdernessWatermarks(Duration.of_millis(100))
    >>> output = Mock(spec=WatermarkOutput)
    >>> generator.on_periodic_emit(output)
    >>> output.method_calls
    []
    >>> generator.on_event("a", 1_000, output)
    >>> generator.on_event("b", 900, output)
    >>> generator.on_periodic_emit(output)
    >>> output.method_calls
    [call.emit_watermark(Watermark(timestamp=899))]
    """

    def __init__(self, max_out_of_orderness: Duration | int) -> None:
        self.out_of_orderness_millis = to_millis(max_out_of_orderness, "max_out_of_orderness")
        if self.out_of_orderness_millis < 0:
            raise ValueError("max_out_of_orderness cannot be negative")
        self._max_timestamp: int | None = None

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        max_timestamp = self._max_timestamp
        if max_timestamp is None or event_timestamp > max_timestamp:
            self._max_timestamp = event_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self._max_timestamp is not None:
            output.emit_watermark(Watermark(self._max_timestamp - self.out_of_orderness_millis - 1))


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    """For timestamps that never decrease: the watermark trails the latest by 1 ms.

    >>> from unittest.mock import Mock
    >>> generator = AscendingTimestampsWatermarks()
    >>> output = Mock(spec=WatermarkOutput)
    >>> generator.on_event("a", 500, output)
    >>> generator.on_periodic_emit(output)
    >>> output.method_calls
    [call.emit_watermark(Watermark(timestamp=499))]
    """

    def __init__(self) -> None:
        super().__init__(0)


class NoWatermarksGenerator(WatermarkGenerator):
    """Emits no watermark at all: event-time operators downstream never fire.

    >>> from unittest.mock import Mock
    >>> generator, output = NoWatermarksGenerator(), Mock(spec=WatermarkOutput)
    >>> generator.on_event("a", 500, output)
    >>> generator.on_periodic_emit(output)
    >>> output.method_calls
    []
    """

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


class WatermarksWithIdleness(WatermarkGenerator):
    """Marks the split idle when no event arrived for `idle_timeout`; active at the next.

    Mailbox thread only. Never marks idle too early, and at most one periodic emit late:
    idleness is checked in `on_periodic_emit`, and the quiet time is counted from the
    last periodic emit that had seen an event since the one before it (or from creation).
    While idle, the wrapped generator's `on_periodic_emit` is not called. (Flink starts
    counting one periodic emit later, so it may mark idle up to one interval later.)
    The time comes from `clock`, a `Clock` in milliseconds.

    >>> from unittest.mock import Mock
    >>> now = [0]
    >>> generator = WatermarksWithIdleness(
    ...     AscendingTimestampsWatermarks(), Duration.of_seconds(1), clock=lambda: now[0]
    ... )
    >>> output = Mock(spec=WatermarkOutput)
    >>> generator.on_event("a", 500, output)
    >>> generator.on_periodic_emit(output)
    >>> now[0] = 1_000
    >>> generator.on_periodic_emit(output)
    >>> output.method_calls
    [call.emit_watermark(Watermark(timestamp=499)), call.mark_idle()]
    >>> generator.on_event("b", 600, output)
    >>> output.method_calls[-1]
    call.mark_active()
    """

    def __init__(
        self, watermarks: WatermarkGenerator, idle_timeout: Duration | int, clock: Clock
    ) -> None:
        self.idle_timeout_millis = to_millis(idle_timeout, "idle_timeout")
        if self.idle_timeout_millis <= 0:
            raise ValueError(f"idle_timeout must be positive, got {self.idle_timeout_millis} ms")
        self._watermarks = watermarks
        self._clock = clock
        self._quiet_since = clock()
        self._saw_event = False
        self._is_idle = False

    @property
    def is_idle(self) -> bool:
        """Whether this generator last marked its output idle."""
        return self._is_idle

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self._saw_event = True
        if self._is_idle:
            self._is_idle = False
            output.mark_active()
        self._watermarks.on_event(event, event_timestamp, output)

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        now = self._clock()
        if self._saw_event:
            self._saw_event = False
            self._quiet_since = now
        elif not self._is_idle and now - self._quiet_since >= self.idle_timeout_millis:
            self._is_idle = True
            output.mark_idle()
        if not self._is_idle:
            self._watermarks.on_periodic_emit(output)


# --- The strategy --------------------------------------------------------------------

_KINDS = ("none", "bounded", "monotonous", "generator")


@dataclass(frozen=True)
class WatermarkStrategy:
    """How a source assigns timestamps and generates watermarks: an immutable recipe.

    Each split of a source gets its own generator from `create_watermark_generator()`.
    `kind` names the recipe: "none", "bounded", "monotonous" or "generator".

    >>> WatermarkStrategy.no_watermarks().is_no_watermarks
    True
    >>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_idleness(
    ...     Duration.of_seconds(30)
    ... )
    >>> strategy.kind, strategy.is_no_watermarks, strategy.idleness
    ('monotonous', False, Duration(millis=30000))
    """

    kind: str
    max_out_of_orderness: Duration | None = None
    """The bound of a "bounded" strategy (0 for "monotonous")."""
    timestamp_assigner: TimestampAssigner | None = None
    """None keeps the timestamp a record already has."""
    idleness: Duration | None = None
    """None never marks a split idle."""
    generator_supplier: Callable[[], WatermarkGenerator] | None = None
    """The user's generator factory of a "generator" strategy."""
    timestamp_column: str | Callable[[Any], Any] | None = None
    """Where event time is, a batch at a time (`with_timestamp_column`); None: use
    `timestamp_assigner`."""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown watermark strategy kind {self.kind!r}; one of {_KINDS}")
        if self.kind == "generator" and self.generator_supplier is None:
            raise ValueError("a 'generator' strategy needs a generator_supplier")

    @property
    def is_no_watermarks(self) -> bool:
        """Whether this strategy never emits a watermark (`no_watermarks()`)."""
        return self.kind == "none"

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        """No watermarks: for processing-time jobs.

        >>> WatermarkStrategy.no_watermarks().kind
        'none'
        """
        return WatermarkStrategy("none")

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """For timestamps that never decrease within a split (`AscendingTimestampsWatermarks`).

        >>> WatermarkStrategy.for_monotonous_timestamps().max_out_of_orderness
        Duration(millis=0)
        """
        return WatermarkStrategy("monotonous", Duration(0))

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration | int) -> WatermarkStrategy:
        """For events at most `max_out_of_orderness` late (`BoundedOutOfOrdernessWatermarks`).

        >>> WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)).kind
        'bounded'
        """
        millis = to_millis(max_out_of_orderness, "max_out_of_orderness")
        return WatermarkStrategy("bounded", Duration(millis))

    @staticmethod
    def for_generator(generator_supplier: Callable[[], WatermarkGenerator]) -> WatermarkStrategy:
        """Watermarks from the user's `WatermarkGenerator`; called once per split.

        A `WatermarkGenerator` subclass itself is a fine supplier.

        >>> strategy = WatermarkStrategy.for_generator(NoWatermarksGenerator)
        >>> type(strategy.create_watermark_generator()).__name__
        'NoWatermarksGenerator'
        """
        if not callable(generator_supplier):
            raise TypeError(
                "for_generator needs a callable returning a WatermarkGenerator, "
                f"got {generator_supplier!r}"
            )
        return WatermarkStrategy("generator", generator_supplier=generator_supplier)

    def with_timestamp_assigner(
        self, assigner: TimestampAssigner | Callable[[Any, int], int]
    ) -> WatermarkStrategy:
        """The same strategy, taking event times from `assigner`.

        `assigner` is a `TimestampAssigner` or a plain `(value, record_timestamp) -> int`.

        >>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        ...     lambda value, record_timestamp: value[1]
        ... )
        >>> strategy.create_timestamp_assigner().extract_timestamp(("a", 1234), 0)
        1234
        """
        if not isinstance(assigner, TimestampAssigner):
            if not callable(assigner):
                raise TypeError(
                    "with_timestamp_assigner needs a TimestampAssigner or a callable "
                    f"(value, record_timestamp) -> int, got {assigner!r}"
                )
            assigner = _FunctionTimestampAssigner(assigner)
        return replace(self, timestamp_assigner=assigner, timestamp_column=None)

    def with_timestamp_column(self, column: str | Callable[[Any], Any]) -> WatermarkStrategy:
        """The same strategy, taking event times from a column, a batch at a time.

        `column` is a column name (integer epoch milliseconds, or an Arrow timestamp or
        date64 column) or a function `pyarrow.RecordBatch -> int64 array`, one per row.
        On Arrow batches it runs once per batch, with no Python work per record; on rows
        of Python objects a name reads `row[name]` (dicts) or `row.name`. Replaces a
        timestamp assigner (the last call wins). barrierflow's own: PyFlink has none.

        >>> WatermarkStrategy.for_monotonous_timestamps().with_timestamp_column(
        ...     "date_time"
        ... ).timestamp_column
        'date_time'
        """
        if not (isinstance(column, str) and column) and not callable(column):
            raise TypeError(
                "with_timestamp_column needs a column name or a function "
                f"pyarrow.RecordBatch -> int64 array, got {column!r}"
            )
        return replace(self, timestamp_column=column, timestamp_assigner=None)

    def with_idleness(self, idle_timeout: Duration | int) -> WatermarkStrategy:
        """The same strategy, marking a split idle after `idle_timeout` without events.

        >>> WatermarkStrategy.no_watermarks().with_idleness(Duration.of_seconds(1)).idleness
        Duration(millis=1000)
        """
        millis = to_millis(idle_timeout, "idle_timeout")
        if millis <= 0:
            raise ValueError(f"idle_timeout must be positive, got {millis} ms")
        return replace(self, idleness=Duration(millis))

    def create_timestamp_assigner(self) -> TimestampAssigner:
        """The assigner to apply to every record (the record's own timestamp by default).

        >>> WatermarkStrategy.no_watermarks().create_timestamp_assigner().extract_timestamp(
        ...     "x", 7
        ... )
        7
        """
        if self.timestamp_assigner is None:
            return RecordTimestampAssigner()
        return self.timestamp_assigner

    def create_watermark_generator(self, clock: Clock = monotonic_millis) -> WatermarkGenerator:
        """A new generator for one split; `clock` (ms) measures idleness, if configured.

        >>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10))
        >>> type(strategy.create_watermark_generator()).__name__
        'BoundedOutOfOrdernessWatermarks'
        >>> strategy = strategy.with_idleness(Duration.of_seconds(5))
        >>> type(strategy.create_watermark_generator(clock=lambda: 0)).__name__
        'WatermarksWithIdleness'
        """
        generator: WatermarkGenerator
        if self.kind == "none":
            generator = NoWatermarksGenerator()
        elif self.kind == "monotonous":
            generator = AscendingTimestampsWatermarks()
        elif self.kind == "bounded":
            generator = BoundedOutOfOrdernessWatermarks(self.max_out_of_orderness or Duration(0))
        else:
            assert self.generator_supplier is not None
            generator = self.generator_supplier()
            if not (
                callable(getattr(generator, "on_event", None))
                and callable(getattr(generator, "on_periodic_emit", None))
            ):
                raise TypeError(
                    "the generator supplier must return a WatermarkGenerator "
                    f"(on_event and on_periodic_emit), got {generator!r}"
                )
        if self.idleness is not None:
            generator = WatermarksWithIdleness(generator, self.idleness, clock)
        return generator
