"""`CheckpointingMode`: the guarantee checkpoints give, read by the API and the barrier handlers.

>>> CheckpointingMode.EXACTLY_ONCE.name
'EXACTLY_ONCE'
"""

from __future__ import annotations

import enum


class CheckpointingMode(enum.Enum):
    """The guarantee checkpoints give for operator state."""

    EXACTLY_ONCE = "exactly_once"
    """Barriers are aligned: every record is reflected in state exactly once."""
    AT_LEAST_ONCE = "at_least_once"
    """Barriers are not aligned: after recovery some records may be counted twice."""
