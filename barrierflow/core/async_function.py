"""`AsyncFunction`: the contract of a user's async I/O call, which the async operator runs.

>>> class Twice(AsyncFunction):
...     async def async_invoke(self, value):
...         return [value, value]
>>> as_async_function(Twice()).timeout  # doctest: +ELLIPSIS
<bound method AsyncFunction.timeout of ...>
>>> async def lookup(value):
...     return [value]
>>> as_async_function(lookup)
AsyncFunction(lookup)
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from barrierflow.core.functions import Function

__all__ = ["AsyncFunction", "as_async_function"]


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
