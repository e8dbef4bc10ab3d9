"""Restart strategies decide from failure times alone."""

from __future__ import annotations

import pytest

from barrierflow import Duration, RestartStrategies
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
