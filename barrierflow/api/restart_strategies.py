"""Re-exports `barrierflow.core.restart_strategies`, its home below every layer that uses it."""

from barrierflow.core.restart_strategies import (
    DEFAULT_WITH_CHECKPOINTING,
    ExponentialDelayRestartStrategyConfiguration,
    FailureRateRestartStrategyConfiguration,
    FixedDelayRestartStrategyConfiguration,
    NoRestartStrategyConfiguration,
    RestartDecision,
    RestartStrategies,
    RestartStrategyConfiguration,
    RestartTracker,
)

__all__ = [
    "DEFAULT_WITH_CHECKPOINTING",
    "ExponentialDelayRestartStrategyConfiguration",
    "FailureRateRestartStrategyConfiguration",
    "FixedDelayRestartStrategyConfiguration",
    "NoRestartStrategyConfiguration",
    "RestartDecision",
    "RestartStrategies",
    "RestartStrategyConfiguration",
    "RestartTracker",
]
