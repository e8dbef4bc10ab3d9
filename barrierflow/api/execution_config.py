"""`ExecutionConfig`: job-wide execution settings, with PyFlink's names."""

from __future__ import annotations

from barrierflow.errors import ConfigurationError
from barrierflow.graph.job_graph import DEFAULT_AUTO_WATERMARK_INTERVAL_MS

DEFAULT_METRICS_INTERVAL_MS = 1000
"""How often a task reports its metrics unless `set_metrics_interval` says otherwise."""


class ExecutionConfig:
    """What `env.get_config()` returns.

    >>> config = ExecutionConfig()
    >>> config.get_auto_watermark_interval()
    200
    >>> config.set_auto_watermark_interval(1000).get_auto_watermark_interval()
    1000
    >>> config.get_latency_tracking_interval(), config.is_latency_tracking_configured()
    (0, False)
    >>> config.set_latency_tracking_interval(500).get_latency_tracking_interval()
    500
    >>> config.set_metrics_interval(250).get_metrics_interval()
    250
    """

    def __init__(self) -> None:
        self._auto_watermark_interval_ms = DEFAULT_AUTO_WATERMARK_INTERVAL_MS
        self._latency_tracking_interval_ms = 0
        self._metrics_interval_ms = DEFAULT_METRICS_INTERVAL_MS
        self._global_job_parameters: dict[str, str] = {}

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

    def set_latency_tracking_interval(self, interval: int) -> ExecutionConfig:
        """Turn latency markers on (Flink's `metrics.latency.interval`): every `interval` ms
        each source subtask emits one, in order with its records; every operator it reaches
        records the marker's age per source vertex (its `latency` metric: count, p50, p95,
        p99, max in `/metrics` and the vertex metrics) and passes it to one random channel
        of each output edge. 0 or less: off, the default (markers then cost nothing)."""
        if isinstance(interval, bool) or not isinstance(interval, int):
            raise ConfigurationError(
                f"the latency tracking interval must be an integer (ms), got {interval!r}"
            )
        self._latency_tracking_interval_ms = max(interval, 0)
        return self

    def get_latency_tracking_interval(self) -> int:
        """The latency marker interval in ms; 0 when latency tracking is off."""
        return self._latency_tracking_interval_ms

    def is_latency_tracking_configured(self) -> bool:
        return self._latency_tracking_interval_ms > 0

    def set_metrics_interval(self, interval: int) -> ExecutionConfig:
        """How often (ms) each task reports its metrics to the JobMaster, which `/metrics`,
        the REST metrics and the dashboard show (default 1000; 0: only when a task starts and
        finishes). Shorter intervals give fresher rates at a small cost per task."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 0:
            raise ConfigurationError(
                f"the metrics interval must be an integer >= 0 (ms), got {interval!r}"
            )
        self._metrics_interval_ms = interval
        return self

    def get_metrics_interval(self) -> int:
        return self._metrics_interval_ms

    def set_global_job_parameters(self, global_job_parameters_dict: dict) -> ExecutionConfig:
        """Parameters every user function can read in the tasks through
        `runtime_context.get_job_parameter(key, default)` (keys and values as strings, as
        Flink keeps them); replaces the ones set before.

        >>> config = ExecutionConfig().set_global_job_parameters({"threshold": 3})
        >>> config.get_global_job_parameters()
        {'threshold': '3'}
        """
        if not isinstance(global_job_parameters_dict, dict):
            raise ConfigurationError(
                f"global job parameters must be a dict, got {global_job_parameters_dict!r:.100}"
            )
        self._global_job_parameters = {
            str(key): str(value) for key, value in global_job_parameters_dict.items()
        }
        return self

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self._global_job_parameters)
