"""Re-exports `barrierflow.core.time`, its home below every layer that uses it."""

from barrierflow.core.time import (
    Duration,
    to_millis,
)

__all__ = [
    "Duration",
    "to_millis",
]
