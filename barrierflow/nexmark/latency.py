"""End-to-end latency of a paced Nexmark run: result emitted minus event created.

When the generator is paced so that event time keeps pace with the wall clock, an event's
`date_time` is the moment the generator made it, and every result carries the event time
of what produced it (a window's result its end, as in Flink). `LatencyProbe`, the last
operator of a measured job, takes the wall clock minus each result's timestamp into a
`LatencyHistogram` over the whole run (not a recent sample: a run's p99 must see every
result) and publishes its percentiles as gauges, which the JobMaster's metrics carry back.
"""

from __future__ import annotations

import math
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK
from barrierflow.functions import ProcessFunction, RuntimeContext

__all__ = ["GAUGES", "LatencyHistogram", "LatencyProbe"]

GAUGES = ("latency_count", "latency_p50_ms", "latency_p95_ms", "latency_p99_ms", "latency_max_ms")
"""The probe's gauges, in the order of `LatencyHistogram.summary()`."""

_BUCKETS_PER_DOUBLING = 32
"""Bucket width is 2^(1/32) - 1, about 2.2 %: the error bound of a reported percentile."""


class LatencyHistogram:
    """Counts latencies (ms) in logarithmic buckets; percentiles within 2.2 %, in O(1) memory.

    Latencies under 1 ms share the first bucket (reported as 0.5 ms); negative ones (clocks of
    two hosts a little apart) count as 0.

    >>> histogram = LatencyHistogram()
    >>> for ms in [1, 2, 3, 4, 100]:
    ...     histogram.add(ms)
    >>> count, p50, p95, p99, worst = histogram.summary()
    >>> count, round(p50, 1), worst
    (5, 3.0, 100)
    """

    __slots__ = ("_buckets", "_count", "_max")

    def __init__(self) -> None:
        self._buckets: dict[int, int] = {}
        self._count = 0
        self._max = 0

    def add(self, latency_ms: int) -> None:
        bucket = -1 if latency_ms < 1 else int(math.log2(latency_ms) * _BUCKETS_PER_DOUBLING)
        self._buckets[bucket] = self._buckets.get(bucket, 0) + 1
        self._count += 1
        if latency_ms > self._max:
            self._max = latency_ms

    def percentile(self, fraction: float) -> float:
        """The latency that `fraction` of the values do not exceed (bucket's midpoint)."""
        if not self._count:
            return 0.0
        rank = max(1, math.ceil(fraction * self._count))
        seen = 0
        for bucket in sorted(self._buckets):
            seen += self._buckets[bucket]
            if seen >= rank:
                if bucket < 0:
                    return 0.5
                low = 2 ** (bucket / _BUCKETS_PER_DOUBLING)
                high = 2 ** ((bucket + 1) / _BUCKETS_PER_DOUBLING)
                return min((low + high) / 2, float(self._max))
        return float(self._max)  # pragma: no cover - the ranks always end in a bucket

    def summary(self) -> tuple[int, float, float, float, int]:
        """(count, p50, p95, p99, max)."""
        return (
            self._count,
            self.percentile(0.50),
            self.percentile(0.95),
            self.percentile(0.99),
            self._max,
        )


class LatencyProbe(ProcessFunction):
    """Passes every result on and records its latency: the wall clock minus its timestamp.

    Results without a timestamp are passed on unmeasured.
    """

    def __init__(self) -> None:
        self._histogram = LatencyHistogram()

    def open(self, runtime_context: RuntimeContext) -> None:
        self._histogram = LatencyHistogram()
        group = runtime_context.get_metrics_group()
        for index, name in enumerate(GAUGES):
            group.gauge(name, _SummaryPart(self._histogram, index))

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Any:
        timestamp = ctx.timestamp()
        if timestamp is not None:
            self._histogram.add(SYSTEM_CLOCK.epoch_millis() - timestamp)
        yield value


class _SummaryPart:
    """One figure of a histogram's summary, read when the task reports its metrics."""

    def __init__(self, histogram: LatencyHistogram, index: int) -> None:
        self._histogram = histogram
        self._index = index

    def __call__(self) -> float:
        return float(self._histogram.summary()[self._index])
