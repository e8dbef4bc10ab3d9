"""TaskMetrics: one attempt's measures of a task, and the values of its metrics report.

The task owns one per attempt: the mailbox loop's time (`MailboxTime`) and the bytes its
input channels delivered; the operators' counters live in the chain (`OperatorMetrics`),
the bytes sent in the output channels. `report_values` reads them all, with every
operator's user metrics, into the plain, msgpack-able values of a `TaskMetricsReport`:

    records_in, records_out         records the head took from the channels (0 for a
                                    source), records that left over the edges (cumulative)
    bytes_in, bytes_out             bytes of every frame received and sent (cumulative)
    busy_ms, idle_ms, backpressured_ms   the loop's time since the attempt ran (cumulative)
    operators                       per operator, head first: uid, name, records_in,
                                    records_out, watermark (None before the first), user:
                                    [name, kind, value] (a distribution's value is
                                    [count, sum, min, max, p50, p95, p99])
                                    latency: {source vertex id: {count, sum, min, max,
                                    p50, p95, p99}} of the latency markers' ages in ms
                                    (empty unless latency tracking is on)

Totals, not rates: the JobMaster computes rates from two reports, so a lost report costs
resolution, not correctness. Mailbox thread only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from barrierflow._clock import Clock
from barrierflow.core.metrics import MetricGroup
from barrierflow.runtime.metrics.mailbox_time import MailboxTime
from barrierflow.runtime.metrics.operator_metrics import OperatorMetrics
from barrierflow.runtime.watermarks import MIN_WATERMARK

__all__ = ["LATENCY_PARTS", "TaskMetrics"]

LATENCY_PARTS = ("count", "sum", "min", "max", "p50", "p95", "p99")
"""The figures of one source's latency distribution in a report, as `Distribution.summary`."""


class TaskMetrics:
    """A task's measures for one attempt (see the module docstring)."""

    def __init__(self, clock: Clock) -> None:
        self.time = MailboxTime(clock)
        self.bytes_in = 0
        """Bytes of every frame the input channels delivered."""

    def report_values(
        self,
        operators: Sequence[OperatorMetrics],
        groups: Sequence[MetricGroup],
        *,
        records_out: int,
        bytes_out: int,
    ) -> dict[str, Any]:
        """The values of a TaskMetricsReport now; `groups[i]` holds operator i's user metrics."""
        busy, idle, backpressured = self.time.totals_ms()
        return {
            "records_in": operators[0].records_in,
            "records_out": records_out,
            "bytes_in": self.bytes_in,
            "bytes_out": bytes_out,
            "busy_ms": busy,
            "idle_ms": idle,
            "backpressured_ms": backpressured,
            "operators": [
                {
                    "uid": op.uid,
                    "name": op.name,
                    "records_in": op.records_in,
                    "records_out": op.records_out,
                    "watermark": None if op.watermark == MIN_WATERMARK else op.watermark,
                    "user": [
                        [name, kind, list(value) if kind == "distribution" else value]
                        for name, kind, value in group.values()
                    ],
                    "latency": {
                        vertex_id: dict(zip(LATENCY_PARTS, distribution.summary(), strict=True))
                        for vertex_id, distribution in sorted(op.latency.items())
                    },
                }
                for op, group in zip(operators, groups, strict=True)
            ],
        }
