"""User metrics: what a function registers through `get_metrics_group()`, with PyFlink's names.

A function asks its runtime context for its `MetricGroup` in `open` and registers
metrics there (PyFlink's `pyflink.metrics` API: `counter`, `gauge`, `meter`,
`distribution`, `add_group`). The task reads them on its mailbox thread when it reports to
the JobMaster (about once a second), so updating one is a plain attribute change, no lock:
user functions run on that same thread.

>>> group = MetricGroup()
>>> seen = group.counter("seen")
>>> seen.inc(); seen.inc(4)
>>> group.add_group("cache").gauge("size", lambda: 7).get_value()
7.0
>>> latency = group.distribution("latency")
>>> for value in (5, 1, 3): latency.update(value)
>>> sorted(group.values())
[('cache.size', 'gauge', 7.0), ('latency', 'distribution', (3, 9.0, 1.0, 5.0, 3.0, 5.0, 5.0)), \
('seen', 'counter', 5)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Counter", "Distribution", "Gauge", "Meter", "MetricGroup"]

SAMPLE_SIZE = 1024
"""A distribution keeps this many most recent values for its percentiles."""


class Counter:
    """A count that goes up (and down); reported as its total."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    def inc(self, n: int = 1) -> None:
        self._count += n

    def dec(self, n: int = 1) -> None:
        self._count -= n

    def get_count(self) -> int:
        return self._count


class Meter:
    """Events over time: reported as the total; the JobMaster turns totals into a rate per
    second between reports (PyFlink's `time_span_in_seconds` is accepted and unused)."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    def mark_event(self, value: int = 1) -> None:
        self._count += value

    def get_count(self) -> int:
        return self._count


class Distribution:
    """Values whose spread matters (latencies, sizes): count, sum, min and max of every value,
    and the 50th/95th/99th percentiles of the most recent SAMPLE_SIZE values."""

    __slots__ = ("_count", "_max", "_min", "_next", "_sample", "_sum")

    def __init__(self) -> None:
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf
        self._sample: list[float] = []
        self._next = 0

    def update(self, value: float) -> None:
        self._count += 1
        self._sum += value
        self._min = min(self._min, value)
        self._max = max(self._max, value)
        if len(self._sample) < SAMPLE_SIZE:
            self._sample.append(value)
        else:
            self._sample[self._next] = value
            self._next = (self._next + 1) % SAMPLE_SIZE

    def summary(self) -> tuple[int, float, float, float, float, float, float]:
        """(count, sum, min, max, p50, p95, p99); zeros before the first value."""
        if not self._count:
            return (0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        ordered = sorted(self._sample)
        return (
            self._count,
            float(self._sum),
            float(self._min),
            float(self._max),
            _percentile(ordered, 0.50),
            _percentile(ordered, 0.95),
            _percentile(ordered, 0.99),
        )


def _percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of sorted values.

    >>> _percentile([1.0, 2.0, 3.0, 4.0], 0.5), _percentile([1.0, 2.0, 3.0, 4.0], 0.99)
    (2.0, 4.0)
    """
    rank = max(1, math.ceil(q * len(ordered)))
    return float(ordered[rank - 1])


class MetricGroup:
    """The metrics of one operator of one subtask (PyFlink's `MetricGroup`). Registering a
    name twice returns the metric registered first (a function opened again keeps counting);
    `add_group` nests names: `group.add_group("cache").counter("hits")` is "cache.hits"."""

    def __init__(self, prefix: str = "", registry: dict[str, Any] | None = None) -> None:
        self._prefix = prefix
        self._metrics: dict[str, Any] = registry if registry is not None else {}

    def add_group(self, name: str, extra: str | None = None) -> MetricGroup:
        """A subgroup; with `extra`, a key-value group (PyFlink): names go `name.extra.`."""
        path = name if extra is None else f"{name}.{extra}"
        return MetricGroup(f"{self._prefix}{path}.", self._metrics)

    def counter(self, name: str) -> Counter:
        return self._register(name, Counter)

    def meter(self, name: str, time_span_in_seconds: int = 60) -> Meter:
        return self._register(name, Meter)

    def distribution(self, name: str) -> Distribution:
        return self._register(name, Distribution)

    def gauge(self, name: str, obj: Callable[[], float]) -> Gauge:
        """A value read when the task reports: `obj()` (a number; anything else is skipped).
        Registering the name again replaces the function."""
        gauge = self._metrics[self._prefix + name] = Gauge(obj)
        return gauge

    def _register(self, name: str, kind: type) -> Any:
        full = self._prefix + name
        metric = self._metrics.get(full)
        if not isinstance(metric, kind):
            metric = self._metrics[full] = kind()
        return metric

    def values(self) -> Iterator[tuple[str, str, Any]]:
        """(name, kind, value) of every metric registered here: a counter's or meter's total,
        a gauge's number, a distribution's `summary()`. A gauge that raises or returns no
        number is left out."""
        for name, metric in self._metrics.items():
            kind = type(metric)
            if kind is Counter:
                yield name, "counter", metric.get_count()
            elif kind is Meter:
                yield name, "meter", metric.get_count()
            elif kind is Distribution:
                yield name, "distribution", metric.summary()
            else:
                value = metric.read()
                if value is not None:
                    yield name, "gauge", value


class Gauge:
    """A value the task reads from a function each time it reports (PyFlink's Gauge)."""

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[], float]) -> None:
        self._read = read

    def get_value(self) -> float | None:
        """The function's value now as a float; None if it raised or gave no number."""
        return self.read()

    def read(self) -> float | None:
        try:
            value = self._read()
        except Exception:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)
