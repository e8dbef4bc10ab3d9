"""`AsyncWaitSpec`: everything one async wait operator is built from, checked on creation.

>>> from barrierflow.core.async_function import AsyncFunction
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
from dataclasses import dataclass
from typing import Any

from barrierflow.core.async_function import AsyncFunction, as_async_function
from barrierflow.core.time import Duration, to_millis
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.async_io.queue import (
    OrderedStreamElementQueue,
    StreamElementQueue,
    UnorderedStreamElementQueue,
)
from barrierflow.runtime.async_io.retry import NO_RETRY_STRATEGY, AsyncRetryStrategy

__all__ = ["DEFAULT_CAPACITY", "AsyncWaitSpec", "OutputMode"]

DEFAULT_CAPACITY = 100
"""Calls in flight per subtask when `capacity` is not given (PyFlink's default)."""


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
