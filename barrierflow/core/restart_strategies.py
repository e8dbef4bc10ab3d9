"""Restart strategies, with PyFlink's names, and the pure decision each one makes.

The JobMaster asks `decide(now_ms)` after every job failure; the answer says
whether to restart and after how long. No clocks are read here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass

from barrierflow.core.time import Duration, to_millis
from barrierflow.errors import ConfigurationError


@dataclass(frozen=True)
class RestartDecision:
    """What to do after a failure."""

    restart: bool
    delay_ms: int
    explanation: str
    """Why the strategy gave up (used in the job's error) or what it allowed."""


class RestartStrategyConfiguration(ABC):
    """A restart strategy; `new_tracker()` gives the per-job mutable part."""

    @abstractmethod
    def new_tracker(self) -> RestartTracker: ...


class RestartTracker(ABC):
    """Counts failures of one job run and decides about restarts."""

    @abstractmethod
    def decide(self, now_ms: int) -> RestartDecision: ...


@dataclass(frozen=True)
class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
    def new_tracker(self) -> RestartTracker:
        return _NoRestart()


class _NoRestart(RestartTracker):
    def decide(self, now_ms: int) -> RestartDecision:
        return RestartDecision(False, 0, "the restart strategy is no_restart")


@dataclass(frozen=True)
class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    restart_attempts: int
    delay_between_attempts_ms: int

    def new_tracker(self) -> RestartTracker:
        return _FixedDelay(self)


class _FixedDelay(RestartTracker):
    def __init__(self, config: FixedDelayRestartStrategyConfiguration) -> None:
        self._config = config
        self._restarts = 0

    def decide(self, now_ms: int) -> RestartDecision:
        limit = self._config.restart_attempts
        if self._restarts >= limit:
            return RestartDecision(
                False, 0, f"fixed-delay restart strategy gave up after {limit} restart(s)"
            )
        self._restarts += 1
        return RestartDecision(
            True,
            self._config.delay_between_attempts_ms,
            f"restart {self._restarts} of {limit} (fixed delay)",
        )


@dataclass(frozen=True)
class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
    max_failures_per_interval: int
    failure_interval_ms: int
    delay_between_attempts_ms: int

    def new_tracker(self) -> RestartTracker:
        return _FailureRate(self)


class _FailureRate(RestartTracker):
    def __init__(self, config: FailureRateRestartStrategyConfiguration) -> None:
        self._config = config
        self._failures: deque[int] = deque()

    def decide(self, now_ms: int) -> RestartDecision:
        config = self._config
        self._failures.append(now_ms)
        while self._failures and self._failures[0] <= now_ms - config.failure_interval_ms:
            self._failures.popleft()
        if len(self._failures) > config.max_failures_per_interval:
            return RestartDecision(
                False,
                0,
                f"failure-rate restart strategy gave up: {len(self._failures)} failures within "
                f"{config.failure_interval_ms} ms (at most {config.max_failures_per_interval})",
            )
        return RestartDecision(True, config.delay_between_attempts_ms, "failure rate allows it")


class RestartStrategies:
    """Factories for restart strategies (PyFlink names; times in ms or as Duration).

    >>> RestartStrategies.fixed_delay_restart(3, 1000).new_tracker().decide(0).restart
    True
    """

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return NoRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: int | Duration
    ) -> RestartStrategyConfiguration:
        if isinstance(restart_attempts, bool) or not isinstance(restart_attempts, int):
            raise ConfigurationError(f"restart_attempts must be an int, got {restart_attempts!r}")
        if restart_attempts < 0:
            raise ConfigurationError(f"restart_attempts must be >= 0, got {restart_attempts}")
        delay = _non_negative(delay_between_attempts, "delay_between_attempts")
        return FixedDelayRestartStrategyConfiguration(restart_attempts, delay)

    @staticmethod
    def failure_rate_restart(
        failure_rate: int,
        failure_interval: int | Duration,
        delay_interval: int | Duration,
    ) -> RestartStrategyConfiguration:
        if isinstance(failure_rate, bool) or not isinstance(failure_rate, int) or failure_rate < 1:
            raise ConfigurationError(f"failure_rate must be an int >= 1, got {failure_rate!r}")
        interval = _non_negative(failure_interval, "failure_interval")
        if interval == 0:
            raise ConfigurationError("failure_interval must be > 0")
        return FailureRateRestartStrategyConfiguration(
            failure_rate, interval, _non_negative(delay_interval, "delay_interval")
        )


DEFAULT_WITH_CHECKPOINTING = FixedDelayRestartStrategyConfiguration(2**31 - 1, 1000)
"""Flink's default once checkpointing is on: keep restarting, 1 s apart."""


def _non_negative(value: int | Duration, what: str) -> int:
    try:
        millis = to_millis(value, what)
    except TypeError as error:
        raise ConfigurationError(str(error)) from None
    if millis < 0:
        raise ConfigurationError(f"{what} must be >= 0 ms, got {millis}")
    return millis
