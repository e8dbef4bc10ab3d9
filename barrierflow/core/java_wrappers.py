"""PyFlink classes that only wrap a Java object (a custom state backend, a Java watermark
assigner). barrierflow runs no Java code of a job, so each is refused when constructed, with
one line naming what to use instead: the job fails while it is defined, never mid-run.

>>> CustomStateBackend(None)
Traceback (most recent call last):
...
barrierflow.errors.JobDefinitionError: CustomStateBackend wraps a Java state backend, which \
barrierflow cannot run: use HashMapStateBackend() or EmbeddedRocksDBStateBackend()
"""

from __future__ import annotations

from typing import Any

from barrierflow.core.state_backends import StateBackend
from barrierflow.errors import JobDefinitionError

CUSTOM_STATE_BACKEND_REFUSED = (
    "CustomStateBackend wraps a Java state backend, which barrierflow cannot run: "
    "use HashMapStateBackend() or EmbeddedRocksDBStateBackend()"
)
PERIODIC_ASSIGNER_REFUSED = (
    "AssignerWithPeriodicWatermarksWrapper wraps a Java watermark assigner, which barrierflow "
    "cannot run: use WatermarkStrategy.for_bounded_out_of_orderness(...)"
    ".with_timestamp_assigner(...)"
)


class CustomStateBackend(StateBackend):
    """PyFlink's wrapper of a Java state backend: refused when constructed."""

    def __init__(self, j_custom_state_backend: Any = None) -> None:
        raise JobDefinitionError(CUSTOM_STATE_BACKEND_REFUSED)


class AssignerWithPeriodicWatermarksWrapper:
    """PyFlink's wrapper of a Java periodic watermark assigner (for the Kinesis consumer):
    refused when constructed."""

    def __init__(self, j_assigner_with_periodic_watermarks: Any = None) -> None:
        raise JobDefinitionError(PERIODIC_ASSIGNER_REFUSED)
