"""Async I/O for users: `AsyncFunction` and `AsyncDataStream`, with PyFlink's names.

An `AsyncFunction` calls an external system (a database, a web service, a model
server) with asyncio, so one subtask keeps many calls in flight instead of waiting
for each in turn. `AsyncDataStream.ordered_wait` keeps the input order;
`unordered_wait` emits each result as soon as it is ready, but never moves a record
across a watermark. Records in flight are part of every checkpoint and are called
again after a restore, so the output stays exactly-once (calls may repeat: make them
idempotent or read-only).

    class Enrich(AsyncFunction):
        async def async_invoke(self, value):
            profile = await client.get_profile(value["user"])
            return [{**value, "country": profile.country}]

        def timeout(self, value):          # optional: without it a timeout fails the job
            return [{**value, "country": None}]

    enriched = AsyncDataStream.unordered_wait(events, Enrich(), Duration.of_seconds(2), 100)

The checks run when the job is defined:

>>> class Twice(AsyncFunction):
...     async def async_invoke(self, value):
...         return [value, value]
>>> spec = AsyncWaitSpec.create(Twice(), timeout=1_000, capacity=10, output_mode=OutputMode.ORDERED)
>>> (spec.timeout_ms, spec.capacity, spec.output_mode.name)
(1000, 10, 'ORDERED')
>>> AsyncWaitSpec.create(Twice(), timeout=1_000, capacity=0, output_mode=OutputMode.ORDERED)
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
barrierflow.errors.ConfigurationError: capacity must be a positive int (...), got 0
"""

from __future__ import annotations

import enum
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from barrierflow.api.functions import Function
from barrierflow.api.time import Duration, to_millis
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.async_io.queue import (
    OrderedStreamElementQueue,
    StreamElementQueue,
    UnorderedStreamElementQueue,
)
from barrierflow.runtime.async_io.retry import NO_RETRY_STRATEGY, AsyncRetryStrategy

__all__ = [
    "DEFAULT_CAPACITY",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncWaitSpec",
    "OutputMode",
    "as_async_function",
]

DEFAULT_CAPACITY = 100
"""Calls in flight per subtask when `capacity` is not given (PyFlink's default)."""


class AsyncFunction(Function, ABC):
    """Calls an external system for each record, with asyncio (PyFlink's `AsyncFunction`).

    `async_invoke(value)` is a coroutine returning the record's results as a list
    (empty for none). `timeout(value)` is called instead when the call has not finished
    within the timeout; it returns the results to emit, or raises to fail the job (the
    default raises `TimeoutError`). `open` and `close` bracket the function's life.

    All of this function's code runs on one asyncio event loop in one helper thread of
    the task, never on the task's own thread, so its coroutines may share the function's
    fields (a client session, a cache) without locks.
    """

    @abstractmethod
    async def async_invoke(self, value: Any) -> list[Any]:
        """Start the call for `value` and return its results."""

    def timeout(self, value: Any) -> list[Any]:
        """The call for `value` timed out: return results to emit, or raise to fail."""
        raise TimeoutError(f"the async call for input {value!r} has timed out")


class _CoroutineFunction(AsyncFunction):
    """An `AsyncFunction` around a plain `async def f(value)`."""

    def __init__(self, coroutine_function: Callable[[Any], Any]) -> None:
        self.coroutine_function = coroutine_function

    async def async_invoke(self, value: Any) -> list[Any]:
        return await self.coroutine_function(value)

    def __repr__(self) -> str:
        return f"AsyncFunction({getattr(self.coroutine_function, '__qualname__', '?')})"


def as_async_function(function: Any) -> AsyncFunction:
    """An `AsyncFunction` with an `async def async_invoke`, or a plain `async def` callable."""
    if isinstance(function, AsyncFunction):
        if not inspect.iscoroutinefunction(function.async_invoke):
            raise TypeError(
                f"method 'async_invoke' of {type(function).__name__} must be declared "
                "with 'async def'"
            )
        return function
    if inspect.iscoroutinefunction(function):
        return _CoroutineFunction(function)
    raise TypeError(
        f"an async function must be an AsyncFunction or an 'async def' callable, got {function!r}"
    )


class OutputMode(enum.Enum):
    """In which order an async operator emits results."""

    ORDERED = "ordered"
    """Input order; watermarks keep their place among the records."""
    UNORDERED = "unordered"
    """Completion order, but no record crosses a watermark."""


@dataclass(frozen=True)
class AsyncWaitSpec:
    """Everything the runtime needs to build one async wait operator; checked on creation."""

    async_function: AsyncFunction
    timeout_ms: int
    """Per-record budget covering all attempts, in ms; 0 means no timeout."""
    capacity: int
    """Most records and watermarks held at once; input stops while the queue is full."""
    output_mode: OutputMode
    retry_strategy: AsyncRetryStrategy = NO_RETRY_STRATEGY
    output_type: Any = None

    @staticmethod
    def create(
        async_function: Any,
        timeout: int | Duration,
        capacity: int = DEFAULT_CAPACITY,
        output_mode: OutputMode = OutputMode.ORDERED,
        retry_strategy: AsyncRetryStrategy = NO_RETRY_STRATEGY,
        output_type: Any = None,
    ) -> AsyncWaitSpec:
        """Check the arguments of `ordered_wait`/`unordered_wait` and build the spec."""
        function = as_async_function(async_function)
        timeout_ms = to_millis(timeout, "timeout")
        if timeout_ms < 0:
            raise ConfigurationError(f"timeout must be >= 0 ms (0: none), got {timeout_ms}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise ConfigurationError(
                "capacity must be a positive int (the number of async calls in flight), "
                f"got {capacity!r}"
            )
        if not isinstance(output_mode, OutputMode):
            raise TypeError(f"output_mode must be an OutputMode, got {output_mode!r}")
        if not isinstance(retry_strategy, AsyncRetryStrategy):
            raise TypeError(
                f"async_retry_strategy must be an AsyncRetryStrategy, got {retry_strategy!r}"
            )
        if retry_strategy is not NO_RETRY_STRATEGY and timeout_ms <= 0:
            raise ConfigurationError("a timeout must be set when async calls are retried")
        return AsyncWaitSpec(
            function, timeout_ms, capacity, output_mode, retry_strategy, output_type
        )

    def create_queue(self) -> StreamElementQueue:
        """A fresh queue of this spec's capacity and mode."""
        if self.output_mode is OutputMode.ORDERED:
            return OrderedStreamElementQueue(self.capacity)
        return UnorderedStreamElementQueue(self.capacity)


class AsyncDataStream:
    """Applies an `AsyncFunction` to a data stream (PyFlink's `AsyncDataStream`)."""

    @staticmethod
    def ordered_wait(
        data_stream: Any,
        async_function: Any,
        timeout: int | Duration,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> Any:
        """Results leave in input order. `timeout` is a Duration or ms (0: none);
        `capacity` bounds the calls in flight."""
        return AsyncDataStream.ordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def ordered_wait_with_retry(
        data_stream: Any,
        async_function: Any,
        timeout: int | Duration,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> Any:
        """`ordered_wait`, retrying calls as `async_retry_strategy` says."""
        spec = AsyncWaitSpec.create(
            async_function, timeout, capacity, OutputMode.ORDERED, async_retry_strategy, output_type
        )
        return _add_to(data_stream, spec)

    @staticmethod
    def unordered_wait(
        data_stream: Any,
        async_function: Any,
        timeout: int | Duration,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> Any:
        """Results leave as they complete, but never across a watermark."""
        return AsyncDataStream.unordered_wait_with_retry(
            data_stream, async_function, timeout, NO_RETRY_STRATEGY, capacity, output_type
        )

    @staticmethod
    def unordered_wait_with_retry(
        data_stream: Any,
        async_function: Any,
        timeout: int | Duration,
        async_retry_strategy: AsyncRetryStrategy,
        capacity: int = DEFAULT_CAPACITY,
        output_type: Any = None,
    ) -> Any:
        """`unordered_wait`, retrying calls as `async_retry_strategy` says."""
        spec = AsyncWaitSpec.create(
            async_function,
            timeout,
            capacity,
            OutputMode.UNORDERED,
            async_retry_strategy,
            output_type,
        )
        return _add_to(data_stream, spec)


def _add_to(data_stream: Any, spec: AsyncWaitSpec) -> Any:
    add_async_wait = getattr(data_stream, "_add_async_wait", None)
    if add_async_wait is None:
        raise TypeError(
            f"async I/O applies to a DataStream, got {type(data_stream).__name__} "
            "(it has no _add_async_wait(spec))"
        )
    return add_async_wait(spec)
