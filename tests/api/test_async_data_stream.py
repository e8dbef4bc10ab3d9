"""AsyncDataStream and AsyncWaitSpec: PyFlink's signatures, checked when the job is defined."""

from __future__ import annotations

from typing import Any

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.api.async_data_stream import AsyncDataStream
from barrierflow.api.datastream import DataStream
from barrierflow.core.async_function import AsyncFunction
from barrierflow.core.time import Duration
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.async_io.queue import (
    OrderedStreamElementQueue,
    UnorderedStreamElementQueue,
)
from barrierflow.runtime.async_io.retry import NO_RETRY_STRATEGY, AsyncRetryStrategy
from barrierflow.runtime.async_io.spec import DEFAULT_CAPACITY, AsyncWaitSpec, OutputMode


class Lookup(AsyncFunction):
    async def async_invoke(self, value: Any) -> list[Any]:
        return [value]


def a_stream() -> DataStream:
    return StreamExecutionEnvironment.get_execution_environment().from_collection([1])


def spec_of(result: DataStream) -> AsyncWaitSpec:
    """The spec the async wait operator after `result`'s input was built with."""
    (spec,) = result._transformation.operator_args
    return spec


RETRY = AsyncRetryStrategy.fixed_delay(3, 100, exception_predicate=lambda e: True)


@pytest.mark.parametrize(
    ("call", "mode", "retry"),
    [
        (lambda s, f: AsyncDataStream.ordered_wait(s, f, 500, 7), OutputMode.ORDERED, None),
        (lambda s, f: AsyncDataStream.unordered_wait(s, f, 500, 7), OutputMode.UNORDERED, None),
        (
            lambda s, f: AsyncDataStream.ordered_wait_with_retry(s, f, 500, RETRY, 7),
            OutputMode.ORDERED,
            RETRY,
        ),
        (
            lambda s, f: AsyncDataStream.unordered_wait_with_retry(s, f, 500, RETRY, 7),
            OutputMode.UNORDERED,
            RETRY,
        ),
    ],
    ids=["ordered_wait", "unordered_wait", "ordered_wait_with_retry", "unordered_wait_with_retry"],
)
def test_each_wait_hands_the_stream_a_spec_of_its_mode(
    call: Any, mode: OutputMode, retry: Any
) -> None:
    stream, function = a_stream(), Lookup()
    result = call(stream, function)
    assert isinstance(result, DataStream)
    assert result._transformation.inputs == [stream._transformation]
    spec = spec_of(result)
    assert spec == AsyncWaitSpec(function, 500, 7, mode, retry or NO_RETRY_STRATEGY)


def test_the_timeout_may_be_a_duration_and_the_capacity_defaults_to_100() -> None:
    spec = spec_of(AsyncDataStream.unordered_wait(a_stream(), Lookup(), Duration.of_seconds(2)))
    assert spec.timeout_ms == 2_000 and spec.capacity == DEFAULT_CAPACITY == 100


def test_a_plain_async_def_function_is_wrapped_into_an_async_function() -> None:
    async def lookup(value: Any) -> list[Any]:
        return [value]

    result = AsyncDataStream.ordered_wait(a_stream(), lookup, 100)
    assert isinstance(spec_of(result).async_function, AsyncFunction)


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (lambda value: [value], "async def"),
        ("not a function", "async def"),
    ],
    ids=["sync lambda", "string"],
)
def test_a_function_that_is_not_async_is_refused(function: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        AsyncDataStream.ordered_wait(a_stream(), function, 100)


def test_an_async_function_with_a_sync_async_invoke_is_refused() -> None:
    class Blocking(AsyncFunction):
        def async_invoke(self, value: Any) -> list[Any]:  # type: ignore[override]
            return [value]

    with pytest.raises(TypeError, match="'async_invoke' of Blocking must be declared"):
        AsyncDataStream.unordered_wait(a_stream(), Blocking(), 100)


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True, "10"])
def test_the_capacity_must_be_a_positive_int(capacity: Any) -> None:
    with pytest.raises(ConfigurationError, match="capacity"):
        AsyncDataStream.ordered_wait(a_stream(), Lookup(), 100, capacity)


def test_a_negative_timeout_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="timeout"):
        AsyncDataStream.ordered_wait(a_stream(), Lookup(), -1)


@pytest.mark.parametrize("timeout", [1.5, "1s", None])
def test_a_timeout_must_be_milliseconds_or_a_duration(timeout: Any) -> None:
    with pytest.raises(TypeError, match="timeout"):
        AsyncDataStream.ordered_wait(a_stream(), Lookup(), timeout)


def test_a_zero_timeout_means_no_timeout_without_retries_only() -> None:
    assert spec_of(AsyncDataStream.ordered_wait(a_stream(), Lookup(), 0)).timeout_ms == 0
    with pytest.raises(ConfigurationError, match="timeout must be set"):
        AsyncDataStream.ordered_wait_with_retry(a_stream(), Lookup(), 0, RETRY)


def test_the_retry_strategy_must_be_a_strategy() -> None:
    with pytest.raises(TypeError, match="AsyncRetryStrategy"):
        AsyncDataStream.unordered_wait_with_retry(a_stream(), Lookup(), 100, None)  # type: ignore[arg-type]


def test_only_a_data_stream_can_host_async_io() -> None:
    with pytest.raises(TypeError, match="DataStream"):
        AsyncDataStream.ordered_wait([1, 2, 3], Lookup(), 100)


def test_the_spec_builds_the_queue_of_its_mode_and_capacity() -> None:
    ordered = AsyncWaitSpec.create(Lookup(), 100, 5, OutputMode.ORDERED).create_queue()
    unordered = AsyncWaitSpec.create(Lookup(), 100, 6, OutputMode.UNORDERED).create_queue()
    assert isinstance(ordered, OrderedStreamElementQueue) and ordered.capacity == 5
    assert isinstance(unordered, UnorderedStreamElementQueue) and unordered.capacity == 6


def test_the_default_timeout_method_raises_a_timeout_error_naming_the_value() -> None:
    with pytest.raises(TimeoutError, match="'user-7'"):
        Lookup().timeout("user-7")
