"""RuntimeExecutionMode (PyFlink's `pyflink.datastream.RuntimeExecutionMode`): how a job runs.

STREAMING: every record's result as it comes, checkpoints as configured. BATCH (bounded
sources only): a keyed reduce or aggregation emits only its final value per key, and no
periodic checkpoints run. AUTOMATIC: BATCH when every source is bounded, else STREAMING.
"""

from __future__ import annotations

import enum


class RuntimeExecutionMode(enum.Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2
