"""`Watermark`: event time's progress, as user watermark generators emit it and channels carry it.

>>> Watermark(1_000).timestamp
1000
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event time has reached `timestamp` (milliseconds): no older record should follow."""

    timestamp: int
