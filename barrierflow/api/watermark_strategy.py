"""Watermark strategies, as in PyFlink. Event-time processing uses them; until then
`from_source` accepts them and `no_watermarks()` is the usual choice."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any

from barrierflow.api.time import Duration


class TimestampAssigner(ABC):
    """Extracts an event timestamp (epoch milliseconds) from a record."""

    @abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        """The event time of `value`; `record_timestamp` is the one it already had, if any."""


@dataclass(frozen=True)
class WatermarkStrategy:
    """How a source assigns timestamps and generates watermarks.

    >>> WatermarkStrategy.no_watermarks().max_out_of_orderness is None
    True
    """

    kind: str
    max_out_of_orderness: Duration | None = None
    timestamp_assigner: TimestampAssigner | None = None
    idleness: Duration | None = None

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        return WatermarkStrategy("none")

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        return WatermarkStrategy("bounded", Duration(0))

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> WatermarkStrategy:
        return WatermarkStrategy("bounded", max_out_of_orderness)

    def with_timestamp_assigner(self, assigner: TimestampAssigner) -> WatermarkStrategy:
        return replace(self, timestamp_assigner=assigner)

    def with_idleness(self, idle_timeout: Duration) -> WatermarkStrategy:
        return replace(self, idleness=idle_timeout)
