"""Restart strategies decide from failure times alone (and exponential delay's jitter from the
generator it is given)."""

from __future__ import annotations

import random

import pytest

from barrierflow import Duration, RestartStrategies, StreamExecutionEnvironment
from barrierflow.api.restart_strategies import (
    DEFAULT_WITH_CHECKPOINTING,
    ExponentialDelayRestartStrategyConfiguration,
)
from barrierflow.errors import ConfigurationError


def test_fixed_delay_allows_the_configured_restarts_then_gives_up():
    tracker = RestartStrategies.fixed_delay_restart(2, Duration.of_seconds(1)).new_tracker()
    assert [tracker.decide(t).restart for t in (0, 10, 20)] == [True, True, False]
    assert (
        tracker.decide(30).explanation == "fixed-delay restart strategy gave up after 2 restart(s)"
    )


def test_fixed_delay_waits_the_configured_delay():
    tracker = RestartStrategies.fixed_delay_restart(1, 250).new_tracker()
    assert tracker.decide(0).delay_ms == 250


def test_failure_rate_counts_only_failures_inside_the_interval():
    tracker = RestartStrategies.failure_rate_restart(2, 1000, 10).new_tracker()
    assert tracker.decide(0).restart
    assert tracker.decide(500).restart
    assert not tracker.decide(900).restart  # three failures within one second


def test_failure_rate_forgets_old_failures():
    tracker = RestartStrategies.failure_rate_restart(1, 1000, 10).new_tracker()
    assert tracker.decide(0).restart
    assert tracker.decide(1500).restart
    assert tracker.decide(3000).restart


def test_no_restart_never_restarts():
    assert not RestartStrategies.no_restart().new_tracker().decide(0).restart


@pytest.mark.parametrize(
    "make",
    [
        lambda: RestartStrategies.fixed_delay_restart(-1, 10),
        lambda: RestartStrategies.fixed_delay_restart(1, -5),
        lambda: RestartStrategies.failure_rate_restart(0, 1000, 10),
        lambda: RestartStrategies.failure_rate_restart(1, 0, 10),
        lambda: RestartStrategies.fixed_delay_restart("3", 10),
    ],
    ids=["negative attempts", "negative delay", "zero rate", "zero interval", "string attempts"],
)
def test_bad_restart_settings_are_configuration_errors(make):
    with pytest.raises(ConfigurationError):
        make()


# --- exponential delay -----------------------------------------------------------------------


class ExtremeJitter(random.Random):
    """Always draws the lowest (or highest) jitter allowed, to pin the bounds exactly."""

    def __init__(self, highest: bool) -> None:
        super().__init__(0)
        self.highest = highest

    def randint(self, a: int, b: int) -> int:
        return b if self.highest else a


def exponential(initial=100, maximum=1000, multiplier=2.0, threshold=10_000, jitter=0.0, **kw):
    return RestartStrategies.exponential_delay_restart(
        initial, maximum, multiplier, threshold, jitter, **kw
    )


def decisions(tracker, times):
    return [(d.restart, d.delay_ms, d.explanation) for d in map(tracker.decide, times)]


def test_exponential_delay_grows_by_the_multiplier_up_to_the_maximum():
    tracker = exponential().new_tracker()
    assert decisions(tracker, [0, 200, 500, 1000, 2000, 3500]) == [
        (True, 100, "restart 1 (exponential delay)"),
        (True, 200, "restart 2 (exponential delay)"),
        (True, 400, "restart 3 (exponential delay)"),
        (True, 800, "restart 4 (exponential delay)"),
        (True, 1000, "restart 5 (exponential delay)"),  # capped
        (True, 1000, "restart 6 (exponential delay)"),
    ]


def test_flink_2_defaults_without_jitter_run_from_1_s_by_1_5x_to_1_min():
    tracker = RestartStrategies.exponential_delay_restart(jitter_factor=0.0).new_tracker()
    now, delays = 0, []
    for _ in range(13):
        delays.append(tracker.decide(now).delay_ms)
        now += delays[-1] + 1  # fails again right after each restart
    assert delays == [
        1000, 1500, 2250, 3375, 5062, 7593, 11390, 17085, 25628, 38443, 57665, 60000, 60000
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("highest", "expected"),
    [
        # base 1000 ± 500 is kept at or above the initial 1000; base 2000 ± 1000 at or below 2000
        (False, [1000, 1000, 1000]),
        (True, [1500, 2000, 2000]),
    ],
    ids=["lowest jitter", "highest jitter"],
)
def test_exponential_jitter_moves_the_delay_by_at_most_its_factor_within_initial_and_max(
    highest, expected
):
    tracker = exponential(1000, 2000, 2.0, 60_000, 0.5).new_tracker(ExtremeJitter(highest))
    assert [tracker.decide(t).delay_ms for t in (0, 5000, 10_000)] == expected


def test_exponential_jitter_is_drawn_from_the_given_generator():
    strategy = exponential(1000, 100_000, 2.0, 10**9, 0.25)

    def delays(seed):
        tracker = strategy.new_tracker(random.Random(seed))
        return [tracker.decide(t * 1_000_000).delay_ms for t in range(6)]

    assert delays(7) == delays(7)
    bases = [1000, 2000, 4000, 8000, 16000, 32000]
    for seed in range(20):
        drawn = delays(seed)
        assert all(
            max(1000, base - base // 4) <= delay <= base + base // 4
            for base, delay in zip(bases, drawn, strict=True)
        )
    assert any(delays(seed) != bases for seed in range(20))


def test_exponential_delay_resets_after_running_failure_free_for_the_threshold():
    tracker = exponential(threshold=5000).new_tracker()
    assert decisions(tracker, [0, 1000, 6199, 11_599]) == [
        (True, 100, "restart 1 (exponential delay)"),  # restart due at 100
        (True, 200, "restart 2 (exponential delay)"),  # due at 1200
        (True, 400, "restart 3 (exponential delay)"),  # ran 4999 ms: no reset; due at 6599
        (True, 100, "restart 1 (exponential delay)"),  # ran 5000 ms since the restart: reset
    ]


def test_exponential_delay_gives_up_after_its_attempts_without_a_reset():
    tracker = exponential(threshold=5000, attempts_before_reset_backoff=2).new_tracker()
    assert decisions(tracker, [0, 1000, 2000]) == [
        (True, 100, "restart 1 of 2 (exponential delay)"),
        (True, 200, "restart 2 of 2 (exponential delay)"),
        (
            False,
            0,
            "exponential-delay restart strategy gave up after 2 restart(s) without a reset",
        ),
    ]


def test_a_reset_gives_the_exponential_delay_its_attempts_back():
    tracker = exponential(threshold=5000, attempts_before_reset_backoff=2).new_tracker()
    assert [d.restart for d in map(tracker.decide, [0, 1000, 6200, 6300, 6800])] == [
        True,
        True,
        True,  # 5000 ms after the restart due at 1200: reset, restart 1 of 2
        True,
        False,
    ]


def test_exponential_delay_takes_durations():
    config = RestartStrategies.exponential_delay_restart(
        Duration.of_seconds(2),
        Duration.of_minutes(1),
        2,
        Duration.of_hours(1),
        0,
    )
    assert config == ExponentialDelayRestartStrategyConfiguration(
        2000, 60_000, 2.0, 3_600_000, 0.0, None
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_backoff": 0},
        {"initial_backoff": "1s"},
        {"max_backoff": -1},
        {"initial_backoff": 2000, "max_backoff": 1000},
        {"backoff_multiplier": 1.0},
        {"backoff_multiplier": True},
        {"backoff_multiplier": float("inf")},
        {"reset_backoff_threshold": 0},
        {"jitter_factor": -0.1},
        {"jitter_factor": 1.5},
        {"jitter_factor": "0.1"},
        {"attempts_before_reset_backoff": 0},
        {"attempts_before_reset_backoff": 2.0},
    ],
    ids=[
        "zero initial",
        "string initial",
        "negative max",
        "max below initial",
        "multiplier not above 1",
        "bool multiplier",
        "infinite multiplier",
        "zero reset threshold",
        "negative jitter",
        "jitter above 1",
        "string jitter",
        "zero attempts",
        "float attempts",
    ],
)
def test_bad_exponential_delay_settings_are_configuration_errors(kwargs):
    with pytest.raises(ConfigurationError):
        RestartStrategies.exponential_delay_restart(**kwargs)


def test_the_default_is_no_restart_without_checkpointing_and_flink_2s_exponential_with_it():
    env = StreamExecutionEnvironment.get_execution_environment()
    assert env.get_restart_strategy() == RestartStrategies.no_restart()
    env.enable_checkpointing(1000)
    default = env.get_restart_strategy()
    assert default == ExponentialDelayRestartStrategyConfiguration(
        initial_backoff_ms=1000,
        max_backoff_ms=60_000,
        backoff_multiplier=1.5,
        reset_backoff_threshold_ms=3_600_000,
        jitter_factor=0.1,
        attempts_before_reset_backoff=None,
    )
    assert default is DEFAULT_WITH_CHECKPOINTING
    assert RestartStrategies.exponential_delay_restart() == default
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(1, 10))
    assert env.get_restart_strategy() == RestartStrategies.fixed_delay_restart(1, 10)
