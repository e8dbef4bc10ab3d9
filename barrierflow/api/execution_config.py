"""`ExecutionConfig`: job-wide execution settings, with PyFlink's names."""

from __future__ import annotations

from barrierflow.errors import ConfigurationError
from barrierflow.graph.job_graph import DEFAULT_AUTO_WATERMARK_INTERVAL_MS


class ExecutionConfig:
    """What `env.get_config()` returns.

    >>> config = ExecutionConfig()
    >>> config.get_auto_watermark_interval()
    200
    >>> config.set_auto_watermark_interval(1000).get_auto_watermark_interval()
    1000
    """

    def __init__(self) -> None:
        self._auto_watermark_interval_ms = DEFAULT_AUTO_WATERMARK_INTERVAL_MS

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        """How often (ms of processing time) periodic watermark generators are asked for a
        watermark: in sources per split, and in `assign_timestamps_and_watermarks`.
        0 turns periodic watermarks off (as in Flink)."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 0:
            raise ConfigurationError(
                f"the auto-watermark interval must be an integer >= 0 (ms), got {interval!r}"
            )
        self._auto_watermark_interval_ms = interval
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._auto_watermark_interval_ms
