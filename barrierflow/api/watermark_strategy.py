"""Re-exports `barrierflow.core.watermark_strategy`, its home below every layer that uses it."""

from barrierflow.core.watermark_strategy import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    Clock,
    NoWatermarksGenerator,
    RecordTimestampAssigner,
    TimestampAssigner,
    WatermarkGenerator,
    WatermarkOutput,
    WatermarkStrategy,
    WatermarksWithIdleness,
    monotonic_millis,
)

__all__ = [
    "AscendingTimestampsWatermarks",
    "BoundedOutOfOrdernessWatermarks",
    "Clock",
    "NoWatermarksGenerator",
    "RecordTimestampAssigner",
    "TimestampAssigner",
    "WatermarkGenerator",
    "WatermarkOutput",
    "WatermarkStrategy",
    "WatermarksWithIdleness",
    "monotonic_millis",
]
