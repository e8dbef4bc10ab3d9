"""Restart strategies, with PyFlink's names, and the pure decision each one makes.

The JobMaster asks `decide(now_ms)` after every job failure; the answer says
whether to restart and after how long. No clocks are read here, and the one
strategy that draws random numbers (exponential delay's jitter) is handed its
generator.
"""

from __future__ import annotations

import math
import random
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


@dataclass(frozen=True)
class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    """Delays that grow by a factor per failure up to a cap, and shrink back after a calm spell.

    The n-th restart since the last reset waits `initial * multiplier**(n-1)` ms, moved at
    random by up to `jitter_factor` of itself and kept within [initial, max]. A failure that
    comes `reset_backoff_threshold_ms` or more after the previous restart was due resets the
    delay to `initial` and the restart count to zero. The strategy gives up when
    `attempts_before_reset_backoff` restarts (None: no limit) did not bring a reset.
    Assumes each `decide` is the failure of a running attempt: the JobMaster asks once per
    attempt, so Flink's merging of concurrent failures of one attempt has nothing to merge.
    """

    initial_backoff_ms: int
    max_backoff_ms: int
    backoff_multiplier: float
    reset_backoff_threshold_ms: int
    jitter_factor: float
    attempts_before_reset_backoff: int | None

    def new_tracker(self, rng: random.Random | None = None) -> RestartTracker:
        """`rng` draws the jitter; tests pass a seeded one, the JobMaster none (OS-seeded)."""
        return _ExponentialDelay(self, rng if rng is not None else random.Random())


class _ExponentialDelay(RestartTracker):
    def __init__(
        self, config: ExponentialDelayRestartStrategyConfiguration, rng: random.Random
    ) -> None:
        self._config = config
        self._rng = rng
        self._restarts = 0
        """Restarts since the backoff was last reset."""
        self._backoff_ms = float(config.initial_backoff_ms)
        """The next restart's delay before jitter."""
        self._restart_due_ms: int | None = None
        """When the previous restart was scheduled to start the job again."""

    def decide(self, now_ms: int) -> RestartDecision:
        config = self._config
        due = self._restart_due_ms
        if due is not None and now_ms - due >= config.reset_backoff_threshold_ms:
            self._restarts = 0
            self._backoff_ms = float(config.initial_backoff_ms)
        limit = config.attempts_before_reset_backoff
        if limit is not None and self._restarts >= limit:
            return RestartDecision(
                False,
                0,
                f"exponential-delay restart strategy gave up after {limit} restart(s) "
                "without a reset",
            )
        base = int(self._backoff_ms)
        spread = int(base * config.jitter_factor)
        jittered = base + (self._rng.randint(-spread, spread) if spread else 0)
        delay = max(config.initial_backoff_ms, min(jittered, config.max_backoff_ms))
        self._restarts += 1
        self._backoff_ms = min(self._backoff_ms * config.backoff_multiplier, config.max_backoff_ms)
        self._restart_due_ms = now_ms + delay
        of = "" if limit is None else f" of {limit}"
        return RestartDecision(True, delay, f"restart {self._restarts}{of} (exponential delay)")


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

    @staticmethod
    def exponential_delay_restart(
        initial_backoff: int | Duration = 1000,
        max_backoff: int | Duration = 60_000,
        backoff_multiplier: float = 1.5,
        reset_backoff_threshold: int | Duration = 3_600_000,
        jitter_factor: float = 0.1,
        attempts_before_reset_backoff: int | None = None,
    ) -> RestartStrategyConfiguration:
        """Flink's exponential delay; the defaults are Flink 2's, the default with checkpoints.

        Without jitter, delays double from 100 ms up to 1 s:

        >>> strategy = RestartStrategies.exponential_delay_restart(100, 1000, 2.0, 60_000, 0.0)
        >>> tracker = strategy.new_tracker()
        >>> [tracker.decide(t).delay_ms for t in (0, 200, 600, 1500, 3000)]
        [100, 200, 400, 800, 1000]
        """
        initial = _at_least_one_ms(initial_backoff, "initial_backoff")
        maximum = _at_least_one_ms(max_backoff, "max_backoff")
        if maximum < initial:
            raise ConfigurationError(
                f"max_backoff ({maximum} ms) must not be below initial_backoff ({initial} ms)"
            )
        multiplier = _number(backoff_multiplier, "backoff_multiplier")
        if not multiplier > 1:
            raise ConfigurationError(f"backoff_multiplier must be > 1, got {backoff_multiplier}")
        threshold = _at_least_one_ms(reset_backoff_threshold, "reset_backoff_threshold")
        jitter = _number(jitter_factor, "jitter_factor")
        if not 0 <= jitter <= 1:
            raise ConfigurationError(f"jitter_factor must be within [0, 1], got {jitter_factor}")
        attempts = attempts_before_reset_backoff
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1
        ):
            raise ConfigurationError(
                f"attempts_before_reset_backoff must be an int >= 1 or None, got {attempts!r}"
            )
        return ExponentialDelayRestartStrategyConfiguration(
            initial, maximum, multiplier, threshold, jitter, attempts
        )


DEFAULT_WITH_CHECKPOINTING = ExponentialDelayRestartStrategyConfiguration(
    initial_backoff_ms=1000,
    max_backoff_ms=60_000,
    backoff_multiplier=1.5,
    reset_backoff_threshold_ms=3_600_000,
    jitter_factor=0.1,
    attempts_before_reset_backoff=None,
)
"""Flink 2's default once checkpointing is on: exponential delay, 1 s growing by 1.5x to
1 min, reset after 1 h without failure, 10 % jitter, no limit on restarts."""


def _at_least_one_ms(value: int | Duration, what: str) -> int:
    millis = _non_negative(value, what)
    if millis < 1:
        raise ConfigurationError(f"{what} must be >= 1 ms, got {millis}")
    return millis


def _number(value: float, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _non_negative(value: int | Duration, what: str) -> int:
    try:
        millis = to_millis(value, what)
    except TypeError as error:
        raise ConfigurationError(str(error)) from None
    if millis < 0:
        raise ConfigurationError(f"{what} must be >= 0 ms, got {millis}")
    return millis
