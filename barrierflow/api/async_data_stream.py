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

Every argument is checked when the job is defined (`AsyncWaitSpec.create`), and the
operator joins the stream the builder was given:

>>> from barrierflow import StreamExecutionEnvironment
>>> class Twice(AsyncFunction):
...     async def async_invoke(self, value):
...         return [value, value]
>>> env = StreamExecutionEnvironment.get_execution_environment()
>>> _ = AsyncDataStream.ordered_wait(env.from_collection([1]), Twice(), 1_000, 10).print()
>>> [v.name for v in env.get_job_graph().vertices]
['Collection -> AsyncWait(Ordered) -> Print']
>>> AsyncDataStream.ordered_wait(env, Twice(), 1_000)
Traceback (most recent call last):
...
TypeError: async I/O applies to a DataStream, got StreamExecutionEnvironment
"""

from __future__ import annotations

from typing import Any

from barrierflow.api.checkpointed_functions import refuse_checkpointed
from barrierflow.api.datastream import DataStream
from barrierflow.core.async_function import AsyncFunction
from barrierflow.core.time import Duration
from barrierflow.runtime.async_io.retry import NO_RETRY_STRATEGY, AsyncRetryStrategy
from barrierflow.runtime.async_io.spec import DEFAULT_CAPACITY, AsyncWaitSpec, OutputMode
from barrierflow.runtime.operators.async_wait import AsyncWaitOperator

__all__ = ["AsyncDataStream", "AsyncFunction"]


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


def _add_to(data_stream: Any, spec: AsyncWaitSpec) -> DataStream:
    """The async wait operator after `data_stream`."""
    if not isinstance(data_stream, DataStream):
        raise TypeError(f"async I/O applies to a DataStream, got {type(data_stream).__name__}")
    refuse_checkpointed(spec.async_function, "an async I/O function")
    mode = "Ordered" if spec.output_mode is OutputMode.ORDERED else "Unordered"
    waited = data_stream._add_operator(f"AsyncWait({mode})", AsyncWaitOperator, spec)
    return waited._declare(spec.output_type, "async wait")
