"""AsyncFunctionRunner: runs an `AsyncFunction` on one asyncio event loop in one helper thread.

Threads: `start`, `invoke` and `close` are called from the task's mailbox thread. All
user code (`open`, `async_invoke`, `timeout`, `close`) runs on the loop thread, so the
function's coroutines never race with each other or with the task. Each outcome goes
back to the mailbox thread as one mail, through the task's `MailboxExecutor.execute`
(callable from any thread); the mail then runs on the mailbox thread, in order with the
task's other mails. The runner holds no operator object: what a completion does is the
`on_complete`/`on_error` pair given to `invoke`.

Per call, the runner enforces:

- one outcome: exactly one of `on_complete(results)` or `on_error(error)` is posted,
  unless the runner is closed first, in which case neither is;
- the timeout (ms, 0: none), a budget over all attempts: when it runs out the attempt is
  cancelled and the function's `timeout(value)` gives the results; a function without
  its own `timeout` fails with a `TimeoutError` naming the value;
- retries as the `AsyncRetryStrategy` says;
- results as a list: None, a string or a non-iterable is an error, as in PyFlink.

The loop is the runner's clock (asyncio's timers); nothing else here reads time.

>>> import queue
>>> class Double(AsyncFunction):
...     async def async_invoke(self, value):
...         return [2 * value]
>>> class Mailbox:                               # a task's MailboxExecutor, run by hand
...     def __init__(self):
...         self.mails = queue.Queue()
...     def execute(self, action, description):
...         self.mails.put(action)
>>> mailbox = Mailbox()
>>> runner = AsyncFunctionRunner(Double(), mailbox, timeout_ms=1_000)
>>> runner.start()
>>> outcomes = []
>>> runner.invoke(21, outcomes.append, outcomes.append)
>>> mailbox.mails.get(timeout=5)()               # the mailbox thread runs the mail
>>> outcomes
[[42]]
>>> runner.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Callable, Iterable
from typing import Any

from barrierflow.core.async_function import AsyncFunction, as_async_function
from barrierflow.runtime.async_io.retry import (
    NO_RETRY_STRATEGY,
    AsyncRetryStrategy,
    next_retry_delay,
)
from barrierflow.runtime.async_io.spec import AsyncWaitSpec
from barrierflow.runtime.mailbox_executor import MailboxExecutor

__all__ = ["AsyncFunctionRunner", "check_results"]

_LIFECYCLE_TIMEOUT_S = 60.0
"""How long `start` and `close` wait for the function's `open` and `close`."""


def check_results(results: Any, what: str = "async_invoke") -> list[Any]:
    """The results of `async_invoke` or `timeout` as a list, or a TypeError saying why not."""
    if results is None:
        raise TypeError(f"the result of {what} cannot be None: return a list (empty for none)")
    if isinstance(results, list):
        return results
    if isinstance(results, str | bytes | bytearray | dict) or not isinstance(results, Iterable):
        raise TypeError(f"the result of {what} must be a list of results, got {results!r}")
    return list(results)


def _retrieve_quietly(task: asyncio.Future[Any]) -> None:
    """Consume the outcome of an abandoned attempt so asyncio does not log it."""
    if not task.cancelled():
        task.exception()


class AsyncFunctionRunner:
    """Runs the calls of one `AsyncFunction` concurrently on a private asyncio loop.

    Mailbox thread for `start`/`invoke`/`close`; the function itself runs on the loop
    thread. Guarantees one outcome mail per call (none after `close`); assumes the
    function does not block the loop.
    """

    def __init__(
        self,
        function: Any,
        mailbox: MailboxExecutor,
        *,
        timeout_ms: int = 0,
        retry_strategy: AsyncRetryStrategy = NO_RETRY_STRATEGY,
        name: str = "async-io",
    ) -> None:
        if timeout_ms < 0:
            raise ValueError(f"timeout_ms must be >= 0 (0: none), got {timeout_ms}")
        self._function = as_async_function(function)
        self._mailbox = mailbox
        self._timeout_ms = timeout_ms
        self._retry_strategy = retry_strategy
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._calls: set[asyncio.Task[None]] = set()
        """Calls in flight; touched on the loop thread only."""
        self._result_mail = f"{name}: a call completed"
        self._failed_mail = f"{name}: a call failed"

    @staticmethod
    def for_spec(
        spec: AsyncWaitSpec, mailbox: MailboxExecutor, name: str = "async-io"
    ) -> AsyncFunctionRunner:
        """The runner of an async wait operator built from its spec."""
        return AsyncFunctionRunner(
            spec.async_function,
            mailbox,
            timeout_ms=spec.timeout_ms,
            retry_strategy=spec.retry_strategy,
            name=name,
        )

    # ---- lifecycle (mailbox thread) ------------------------------------------------------------

    def start(self, runtime_context: Any = None) -> None:
        """Start the loop thread and run the function's `open(runtime_context)` on it."""
        if self._loop is not None:
            raise RuntimeError(f"{self._name}: the runner was started already")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=self._run_loop, args=(loop,), name=f"{self._name}-loop", daemon=True
        )
        self._thread.start()
        self._on_loop(self._open(runtime_context))

    def invoke(
        self,
        value: Any,
        on_complete: Callable[[list[Any]], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        """Start the call for `value`; its outcome comes back as a mail that runs
        `on_complete(results)` or `on_error(error)` on the mailbox thread."""
        if self._loop is None or self._closed:
            raise RuntimeError(f"{self._name}: invoke() needs a started, open runner")
        asyncio.run_coroutine_threadsafe(self._call(value, on_complete, on_error), self._loop)

    def close(self) -> None:
        """Cancel the calls in flight (their outcomes are not posted), run the function's
        `close()`, stop the loop and join its thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            self._on_loop(self._shutdown())
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(_LIFECYCLE_TIMEOUT_S)

    @property
    def is_running(self) -> bool:
        return self._loop is not None and not self._closed

    def _on_loop(self, coroutine: Any) -> Any:
        """Run `coroutine` on the loop and wait for it (lifecycle steps only)."""
        assert self._loop is not None
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(_LIFECYCLE_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(
                f"{self._name}: the async function's open/close took over "
                f"{_LIFECYCLE_TIMEOUT_S:.0f} s"
            ) from None

    # ---- the loop thread -----------------------------------------------------------------------

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _open(self, runtime_context: Any) -> None:
        self._function.open(runtime_context)

    async def _shutdown(self) -> None:
        calls = list(self._calls)
        for call in calls:
            call.cancel()
        if calls:
            # A call that swallows its cancellation is abandoned after a while.
            await asyncio.wait(calls, timeout=_LIFECYCLE_TIMEOUT_S / 2)
        self._function.close()

    async def _call(
        self,
        value: Any,
        on_complete: Callable[[list[Any]], None],
        on_error: Callable[[BaseException], None],
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        try:
            try:
                results = await self._call_within_timeout(value)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                self._mailbox.execute(functools.partial(on_error, error), self._failed_mail)
            else:
                self._mailbox.execute(functools.partial(on_complete, results), self._result_mail)
        finally:
            self._calls.discard(task)

    async def _call_within_timeout(self, value: Any) -> list[Any]:
        if self._timeout_ms <= 0:
            return await self._attempts(value)
        attempts = asyncio.ensure_future(self._attempts(value))
        try:
            done, _ = await asyncio.wait({attempts}, timeout=self._timeout_ms / 1000)
        except asyncio.CancelledError:
            attempts.cancel()
            attempts.add_done_callback(_retrieve_quietly)
            raise
        if attempts in done:
            return attempts.result()
        # The budget ran out: abandon the attempt (or the backoff) without waiting for it.
        attempts.cancel()
        attempts.add_done_callback(_retrieve_quietly)
        return await self._on_timeout(value)

    async def _attempts(self, value: Any) -> list[Any]:
        attempt = 1
        while True:
            try:
                raw = await self._function.async_invoke(value)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                delay = next_retry_delay(self._retry_strategy, attempt, error=error)
                if delay is None:
                    raise
            else:
                results = check_results(raw, "async_invoke")
                delay = next_retry_delay(self._retry_strategy, attempt, results=results)
                if delay is None:
                    return results
            await asyncio.sleep(delay / 1000)
            attempt += 1

    async def _on_timeout(self, value: Any) -> list[Any]:
        if type(self._function).timeout is AsyncFunction.timeout:
            raise TimeoutError(
                f"the async call for input {value!r} did not complete within {self._timeout_ms} ms"
            )
        results = self._function.timeout(value)
        if inspect.isawaitable(results):
            results = await results
        return check_results(results, "timeout")

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self._loop else "new"
        return f"AsyncFunctionRunner({self._name!r}, {self._function!r}, {state})"
