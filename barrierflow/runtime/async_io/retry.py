"""Retries of async calls (PyFlink's `AsyncRetryStrategy`, FLIP-232).

A strategy answers three questions: may attempt n be followed by another
(`can_retry(n)`), how long to wait before it (`get_backoff_time_millis(n)`), and which
outcomes deserve a retry (`get_retry_predicate()`: a predicate on the results, one on
the exception; a missing predicate never asks for a retry). Attempts count from 1, and
as in Flink `max_attempts` bounds the attempt number that may still be retried, so a
call runs at most `max_attempts + 1` times. The per-record timeout covers all attempts.

>>> strategy = AsyncRetryStrategy.fixed_delay(
...     max_attempts=2, backoff_time_millis=100,
...     exception_predicate=lambda error: isinstance(error, ConnectionError))
>>> next_retry_delay(strategy, 1, error=ConnectionError("reset"))
100
>>> next_retry_delay(strategy, 1, error=ValueError("bad input")) is None   # not retryable
True
>>> next_retry_delay(strategy, 3, error=ConnectionError("reset")) is None  # attempts used up
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "NO_RETRY_STRATEGY",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "ExponentialBackoffDelayRetryStrategy",
    "FixedDelayRetryStrategy",
    "NoRetryStrategy",
    "next_retry_delay",
]

ResultPredicate = Callable[[Sequence[Any]], bool]
"""Whether a call's results ask for another attempt."""

ExceptionPredicate = Callable[[BaseException], bool]
"""Whether a call's exception asks for another attempt."""


class AsyncRetryPredicate:
    """The two predicates of a retry strategy; None means "never retry on this outcome"."""

    def __init__(
        self,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> None:
        self._result_predicate = result_predicate
        self._exception_predicate = exception_predicate

    def result_predicate(self) -> ResultPredicate | None:
        return self._result_predicate

    def exception_predicate(self) -> ExceptionPredicate | None:
        return self._exception_predicate


class AsyncRetryStrategy:
    """When and how often an async call is attempted again. Build one with the factories."""

    def can_retry(self, current_attempts: int) -> bool:
        """Whether attempt number `current_attempts` (from 1) may be followed by another."""
        raise NotImplementedError

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        """How long to wait after attempt `current_attempts` before the next one."""
        raise NotImplementedError

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        raise NotImplementedError

    @staticmethod
    def fixed_delay(
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> FixedDelayRetryStrategy:
        return FixedDelayRetryStrategy(
            max_attempts, backoff_time_millis, result_predicate, exception_predicate
        )

    @staticmethod
    def exponential_backoff(
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> ExponentialBackoffDelayRetryStrategy:
        return ExponentialBackoffDelayRetryStrategy(
            max_attempts,
            initial_delay,
            max_retry_delay,
            multiplier,
            result_predicate,
            exception_predicate,
        )


class NoRetryStrategy(AsyncRetryStrategy):
    """Every call is attempted once."""

    def can_retry(self, current_attempts: int) -> bool:
        return False

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return -1

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return AsyncRetryPredicate()

    def __repr__(self) -> str:
        return "NO_RETRY_STRATEGY"


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{name} must be greater than zero, got {value!r}")


class FixedDelayRetryStrategy(AsyncRetryStrategy):
    """Up to `max_attempts` retries, each after the same delay."""

    def __init__(
        self,
        max_attempts: int,
        backoff_time_millis: int,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> None:
        _positive("max_attempts", max_attempts)
        _positive("backoff_time_millis", backoff_time_millis)
        self.max_attempts = max_attempts
        self.backoff_time_millis = backoff_time_millis
        self._predicate = AsyncRetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self.max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        return self.backoff_time_millis

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


class ExponentialBackoffDelayRetryStrategy(AsyncRetryStrategy):
    """Up to `max_attempts` retries; the delay starts at `initial_delay` and grows by
    `multiplier` per attempt, capped at `max_retry_delay`.

    Unlike PyFlink's, the delay is a function of the attempt number alone (PyFlink keeps
    the last delay in the strategy object, shared by every record in flight).
    """

    def __init__(
        self,
        max_attempts: int,
        initial_delay: int,
        max_retry_delay: int,
        multiplier: float,
        result_predicate: ResultPredicate | None = None,
        exception_predicate: ExceptionPredicate | None = None,
    ) -> None:
        for name, value in (
            ("max_attempts", max_attempts),
            ("initial_delay", initial_delay),
            ("max_retry_delay", max_retry_delay),
            ("multiplier", multiplier),
        ):
            _positive(name, value)
        self.max_attempts = max_attempts
        self.initial_delay = initial_delay
        self.max_retry_delay = max_retry_delay
        self.multiplier = multiplier
        self._predicate = AsyncRetryPredicate(result_predicate, exception_predicate)

    def can_retry(self, current_attempts: int) -> bool:
        return current_attempts <= self.max_attempts

    def get_backoff_time_millis(self, current_attempts: int) -> int:
        delay = self.initial_delay * self.multiplier ** max(current_attempts - 1, 0)
        return int(min(delay, self.max_retry_delay))

    def get_retry_predicate(self) -> AsyncRetryPredicate:
        return self._predicate


NO_RETRY_STRATEGY = NoRetryStrategy()
"""The strategy of `ordered_wait` and `unordered_wait`: no retries."""


def next_retry_delay(
    strategy: AsyncRetryStrategy,
    current_attempts: int,
    *,
    results: Sequence[Any] | None = None,
    error: BaseException | None = None,
) -> int | None:
    """The delay (ms) before retrying after attempt `current_attempts` ended with `results`
    or `error`, or None when that outcome is final."""
    if not strategy.can_retry(current_attempts):
        return None
    predicate = strategy.get_retry_predicate()
    if error is not None:
        wants_retry = predicate.exception_predicate()
        if wants_retry is None or not wants_retry(error):
            return None
    else:
        wants_retry = predicate.result_predicate()
        if wants_retry is None or not wants_retry(results if results is not None else ()):
            return None
    return max(strategy.get_backoff_time_millis(current_attempts), 0)
