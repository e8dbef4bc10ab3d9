"""AsyncFunctionRunner with real asyncio: threads, concurrency, timeouts, errors, retries, close.

The test's thread plays the task's mailbox thread (see `async_harness.Mailbox`). Waits are
bounded by the mailbox's timeout, never by sleeping in the test.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from async_harness import Mailbox

from barrierflow.core.async_function import AsyncFunction
from barrierflow.runtime.async_io.retry import AsyncRetryStrategy
from barrierflow.runtime.async_io.runner import AsyncFunctionRunner

LONG_S = 30.0
"""A call that never finishes within a test: it must be cancelled, not waited for."""


class Outcomes:
    """The outcome callbacks of `invoke`, recording what ran and on which thread."""

    def __init__(self) -> None:
        self.results: dict[Any, list[Any]] = {}
        self.errors: dict[Any, BaseException] = {}
        self.threads: set[threading.Thread] = set()

    def callbacks(self, value: Any) -> tuple[Any, Any]:
        def on_complete(results: list[Any]) -> None:
            self.threads.add(threading.current_thread())
            assert value not in self.results and value not in self.errors, "two outcomes"
            self.results[value] = results

        def on_error(error: BaseException) -> None:
            self.threads.add(threading.current_thread())
            assert value not in self.results and value not in self.errors, "two outcomes"
            self.errors[value] = error

        return on_complete, on_error

    @property
    def count(self) -> int:
        return len(self.results) + len(self.errors)


def run_calls(
    function: Any, values: list[Any], *, timeout_ms: int = 0, retry: Any = None
) -> tuple[Outcomes, Mailbox]:
    """Invoke every value, run mails until each has its outcome, close the runner."""
    mailbox = Mailbox()
    kwargs: dict[str, Any] = {"timeout_ms": timeout_ms}
    if retry is not None:
        kwargs["retry_strategy"] = retry
    runner = AsyncFunctionRunner(function, mailbox, **kwargs)
    runner.start()
    outcomes = Outcomes()
    try:
        for value in values:
            runner.invoke(value, *outcomes.callbacks(value))
        while outcomes.count < len(values):
            mailbox.run_one()
    finally:
        runner.close()
    return outcomes, mailbox


class ThreadRecorder(AsyncFunction):
    """Remembers the thread each of its methods ran on."""

    def __init__(self) -> None:
        self.threads: dict[str, set[str]] = {}

    def _note(self, method: str) -> None:
        self.threads.setdefault(method, set()).add(threading.current_thread().name)

    def open(self, runtime_context: Any) -> None:
        self._note("open")

    async def async_invoke(self, value: Any) -> list[Any]:
        self._note("async_invoke")
        if value == "slow":
            await asyncio.sleep(LONG_S)
        return [value]

    def timeout(self, value: Any) -> list[Any]:
        self._note("timeout")
        return ["timed out"]

    def close(self) -> None:
        self._note("close")


def test_all_user_code_runs_on_one_loop_thread_and_outcomes_on_the_mailbox_thread() -> None:
    function = ThreadRecorder()
    outcomes, mailbox = run_calls(function, ["a", "b", "slow"], timeout_ms=50)

    assert outcomes.results == {"a": ["a"], "b": ["b"], "slow": ["timed out"]}
    assert outcomes.threads == {mailbox.owner}
    user_threads = set().union(*function.threads.values())
    assert set(function.threads) == {"open", "async_invoke", "timeout", "close"}
    assert len(user_threads) == 1 and mailbox.owner.name not in user_threads


def test_calls_run_concurrently() -> None:
    """Each call waits until all have started: a runner that ran them one by one would hang."""
    count = 12

    class WaitForAll(AsyncFunction):
        def open(self, runtime_context: Any) -> None:
            self.started = 0
            self.all_started = asyncio.Event()

        async def async_invoke(self, value: Any) -> list[Any]:
            self.started += 1
            if self.started == count:
                self.all_started.set()
            await asyncio.wait_for(self.all_started.wait(), timeout=5)
            return [value]

    outcomes, _ = run_calls(WaitForAll(), list(range(count)))
    assert outcomes.errors == {}
    assert outcomes.results == {i: [i] for i in range(count)}


def test_a_plain_async_def_function_is_accepted() -> None:
    async def double(value: int) -> list[int]:
        return [value, value]

    outcomes, _ = run_calls(double, [3])
    assert outcomes.results == {3: [3, 3]}


def test_a_function_whose_async_invoke_is_not_a_coroutine_is_refused() -> None:
    class NotAsync(AsyncFunction):
        def async_invoke(self, value: Any) -> list[Any]:  # type: ignore[override]
            return [value]

    with pytest.raises(TypeError, match="async def"):
        AsyncFunctionRunner(NotAsync(), Mailbox())
    with pytest.raises(TypeError, match="async def"):
        AsyncFunctionRunner(lambda value: [value], Mailbox())


# ---- results -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "expected"),
    [([1, 2], [1, 2]), ((1, 2), [1, 2]), ([], []), ({"x": 1}.values(), [1])],
    ids=["list", "tuple", "empty", "iterable"],
)
def test_results_may_be_any_non_string_iterable(returned: Any, expected: list[Any]) -> None:
    async def give(value: Any) -> Any:
        return returned

    outcomes, _ = run_calls(give, ["v"])
    assert outcomes.results == {"v": expected}


@pytest.mark.parametrize(
    ("returned", "message"),
    [(None, "cannot be None"), ("abc", "must be a list"), (42, "must be a list")],
    ids=["none", "string", "int"],
)
def test_a_result_that_is_not_a_list_fails_the_call(returned: Any, message: str) -> None:
    async def give(value: Any) -> Any:
        return returned

    outcomes, _ = run_calls(give, ["v"])
    assert isinstance(outcomes.errors["v"], TypeError)
    assert message in str(outcomes.errors["v"])


def test_an_exception_in_async_invoke_fails_that_call_only() -> None:
    async def maybe_fail(value: int) -> list[int]:
        if value == 2:
            raise ValueError(f"cannot enrich {value}")
        return [value]

    outcomes, _ = run_calls(maybe_fail, [1, 2, 3])
    assert outcomes.results == {1: [1], 3: [3]}
    assert isinstance(outcomes.errors[2], ValueError)
    assert str(outcomes.errors[2]) == "cannot enrich 2"


# ---- timeouts ----------------------------------------------------------------------------------


class SlowWithTimeout(AsyncFunction):
    """Never finishes in time; its `timeout` gives a fallback result."""

    def open(self, runtime_context: Any) -> None:
        self.cancelled: list[Any] = []

    async def async_invoke(self, value: Any) -> list[Any]:
        try:
            await asyncio.sleep(LONG_S)
        except asyncio.CancelledError:
            self.cancelled.append(value)
            raise
        return [value]

    def timeout(self, value: Any) -> list[Any]:
        return [("fallback", value)]


def test_a_timed_out_call_is_cancelled_and_gives_the_results_of_timeout() -> None:
    function = SlowWithTimeout()
    outcomes, _ = run_calls(function, ["a", "b"], timeout_ms=30)
    assert outcomes.results == {"a": [("fallback", "a")], "b": [("fallback", "b")]}
    assert sorted(function.cancelled) == ["a", "b"]


def test_without_its_own_timeout_a_timed_out_call_fails_with_a_timeout_error_naming_the_value() -> (
    None
):
    async def slow(value: Any) -> list[Any]:
        await asyncio.sleep(LONG_S)
        return [value]

    outcomes, _ = run_calls(slow, [("order", 7)], timeout_ms=30)
    (error,) = outcomes.errors.values()
    assert isinstance(error, TimeoutError)
    assert "('order', 7)" in str(error) and "30 ms" in str(error)


def test_an_exception_raised_by_timeout_fails_the_call() -> None:
    class Strict(SlowWithTimeout):
        def timeout(self, value: Any) -> list[Any]:
            raise LookupError(f"no fallback for {value}")

    outcomes, _ = run_calls(Strict(), ["a"], timeout_ms=30)
    assert isinstance(outcomes.errors["a"], LookupError)


def test_an_async_timeout_method_is_awaited() -> None:
    class AsyncFallback(SlowWithTimeout):
        async def timeout(self, value: Any) -> list[Any]:  # type: ignore[override]
            await asyncio.sleep(0)
            return ["async fallback"]

    outcomes, _ = run_calls(AsyncFallback(), ["a"], timeout_ms=30)
    assert outcomes.results == {"a": ["async fallback"]}


def test_a_call_that_finishes_in_time_is_not_timed_out() -> None:
    class Quick(SlowWithTimeout):
        async def async_invoke(self, value: Any) -> list[Any]:
            await asyncio.sleep(0.001)
            return [value]

    outcomes, _ = run_calls(Quick(), ["a"], timeout_ms=5_000)
    assert outcomes.results == {"a": ["a"]}


# ---- retries -----------------------------------------------------------------------------------


class Flaky(AsyncFunction):
    """Fails the first `failures` attempts of every value with ConnectionError."""

    def __init__(self, failures: int, error: type[Exception] = ConnectionError) -> None:
        self.failures = failures
        self.error = error
        self.attempts: dict[Any, int] = {}

    async def async_invoke(self, value: Any) -> list[Any]:
        self.attempts[value] = self.attempts.get(value, 0) + 1
        if self.attempts[value] <= self.failures:
            raise self.error(f"attempt {self.attempts[value]} of {value} failed")
        return [value]


def retry_on_connection_errors(max_attempts: int, backoff_ms: int = 1) -> AsyncRetryStrategy:
    return AsyncRetryStrategy.fixed_delay(
        max_attempts=max_attempts,
        backoff_time_millis=backoff_ms,
        exception_predicate=lambda error: isinstance(error, ConnectionError),
    )


def test_a_retryable_exception_is_retried_until_the_call_succeeds() -> None:
    function = Flaky(failures=2)
    outcomes, _ = run_calls(
        function, ["a", "b"], timeout_ms=5_000, retry=retry_on_connection_errors(3)
    )
    assert outcomes.results == {"a": ["a"], "b": ["b"]}
    assert function.attempts == {"a": 3, "b": 3}


def test_retries_stop_after_max_attempts_retries_and_the_last_error_fails_the_call() -> None:
    function = Flaky(failures=100)
    outcomes, _ = run_calls(function, ["a"], timeout_ms=5_000, retry=retry_on_connection_errors(2))
    assert function.attempts == {"a": 3}, "max_attempts=2 allows two retries after the first call"
    assert str(outcomes.errors["a"]) == "attempt 3 of a failed"


def test_an_exception_the_predicate_does_not_accept_is_not_retried() -> None:
    function = Flaky(failures=1, error=ValueError)
    outcomes, _ = run_calls(function, ["a"], timeout_ms=5_000, retry=retry_on_connection_errors(5))
    assert function.attempts == {"a": 1}
    assert isinstance(outcomes.errors["a"], ValueError)


def test_results_the_result_predicate_rejects_are_retried() -> None:
    class EmptyFirst(AsyncFunction):
        def __init__(self) -> None:
            self.attempts = 0

        async def async_invoke(self, value: Any) -> list[Any]:
            self.attempts += 1
            return [] if self.attempts < 3 else [value]

    function = EmptyFirst()
    retry = AsyncRetryStrategy.fixed_delay(
        max_attempts=5, backoff_time_millis=1, result_predicate=lambda results: not results
    )
    outcomes, _ = run_calls(function, ["a"], timeout_ms=5_000, retry=retry)
    assert outcomes.results == {"a": ["a"]} and function.attempts == 3


def test_the_timeout_covers_all_attempts_and_their_backoff() -> None:
    class FlakyWithFallback(Flaky):
        def timeout(self, value: Any) -> list[Any]:
            return ["gave up"]

    function = FlakyWithFallback(failures=100)
    retry = retry_on_connection_errors(max_attempts=100, backoff_ms=20)
    outcomes, _ = run_calls(function, ["a"], timeout_ms=60, retry=retry)
    assert outcomes.results == {"a": ["gave up"]}
    assert 1 <= function.attempts["a"] < 10


def test_exponential_backoff_grows_by_the_multiplier_up_to_the_cap() -> None:
    strategy = AsyncRetryStrategy.exponential_backoff(
        max_attempts=10, initial_delay=10, max_retry_delay=100, multiplier=3.0
    )
    assert [strategy.get_backoff_time_millis(n) for n in range(1, 6)] == [10, 30, 90, 100, 100]
    assert strategy.can_retry(10) and not strategy.can_retry(11)


@pytest.mark.parametrize(
    "make",
    [
        lambda: AsyncRetryStrategy.fixed_delay(0, 10),
        lambda: AsyncRetryStrategy.fixed_delay(3, 0),
        lambda: AsyncRetryStrategy.exponential_backoff(3, 10, 0, 2.0),
        lambda: AsyncRetryStrategy.exponential_backoff(3, 10, 100, -1.0),
    ],
    ids=["no attempts", "no backoff", "no cap", "negative multiplier"],
)
def test_a_retry_strategy_needs_positive_parameters(make: Any) -> None:
    with pytest.raises(ValueError, match="greater than zero"):
        make()


# ---- lifecycle ---------------------------------------------------------------------------------


def test_close_cancels_the_calls_in_flight_posts_nothing_and_closes_the_function() -> None:
    class Endless(AsyncFunction):
        def __init__(self) -> None:
            self.started = threading.Event()
            self.cancelled = 0
            self.closed = False

        async def async_invoke(self, value: Any) -> list[Any]:
            self.started.set()
            try:
                await asyncio.sleep(LONG_S)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            return [value]

        def close(self) -> None:
            self.closed = True

    function = Endless()
    mailbox = Mailbox()
    runner = AsyncFunctionRunner(function, mailbox)
    runner.start()
    outcomes = Outcomes()
    runner.invoke("a", *outcomes.callbacks("a"))
    runner.invoke("b", *outcomes.callbacks("b"))
    assert function.started.wait(5)

    runner.close()
    assert function.cancelled == 2 and function.closed
    assert mailbox.pending == 0 and outcomes.count == 0
    assert not runner.is_running
    with pytest.raises(RuntimeError, match="started, open runner"):
        runner.invoke("c", *outcomes.callbacks("c"))
    runner.close()  # idempotent


def test_invoke_before_start_is_refused() -> None:
    async def identity(value: Any) -> list[Any]:
        return [value]

    runner = AsyncFunctionRunner(identity, Mailbox())
    with pytest.raises(RuntimeError, match="started"):
        runner.invoke("a", print, print)


def test_an_error_in_open_fails_start() -> None:
    class BrokenOpen(AsyncFunction):
        def open(self, runtime_context: Any) -> None:
            raise ConnectionRefusedError("database down")

        async def async_invoke(self, value: Any) -> list[Any]:
            return [value]

    runner = AsyncFunctionRunner(BrokenOpen(), Mailbox())
    with pytest.raises(ConnectionRefusedError, match="database down"):
        runner.start()
    runner.close()


def test_open_receives_the_runtime_context() -> None:
    class RemembersContext(AsyncFunction):
        def open(self, runtime_context: Any) -> None:
            self.context = runtime_context

        async def async_invoke(self, value: Any) -> list[Any]:
            return [value]

    function = RemembersContext()
    runner = AsyncFunctionRunner(function, Mailbox())
    runner.start("the context")
    runner.close()
    assert function.context == "the context"


def test_a_negative_timeout_is_refused() -> None:
    async def identity(value: Any) -> list[Any]:
        return [value]

    with pytest.raises(ValueError, match="timeout_ms"):
        AsyncFunctionRunner(identity, Mailbox(), timeout_ms=-1)
