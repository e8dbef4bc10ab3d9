"""Re-exports `barrierflow.core.output_tag`, its home below every layer that uses it."""

from barrierflow.core.output_tag import (
    OutputTag,
)

__all__ = [
    "OutputTag",
]
