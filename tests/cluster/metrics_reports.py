"""Building TaskMetricsReports for the JobMaster-side metrics tests."""

from __future__ import annotations

from typing import Any

from barrierflow.runtime.task_messages import TaskMetricsReport


def operator(
    uid: str,
    name: str,
    records_in: int = 0,
    records_out: int = 0,
    watermark: int | None = None,
    user: list[list[Any]] | None = None,
    latency: dict[int, dict[str, float]] | None = None,
) -> dict[str, Any]:
    return {
        "uid": uid,
        "name": name,
        "records_in": records_in,
        "records_out": records_out,
        "watermark": watermark,
        "user": user or [],
        "latency": latency or {},
    }


def report(
    time_ms: int,
    *,
    attempt: int = 0,
    partition: int = 0,
    records_in: int = 0,
    records_out: int = 0,
    bytes_in: int = 0,
    bytes_out: int = 0,
    busy_ms: float = 0.0,
    idle_ms: float = 0.0,
    backpressured_ms: float = 0.0,
    operators: list[dict[str, Any]] | None = None,
) -> TaskMetricsReport:
    return TaskMetricsReport(
        attempt,
        partition,
        time_ms,
        {
            "records_in": records_in,
            "records_out": records_out,
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
            "busy_ms": busy_ms,
            "idle_ms": idle_ms,
            "backpressured_ms": backpressured_ms,
            "operators": operators or [operator("op", "Op", records_in, records_out)],
        },
    )
