"""State TTL scenarios' shared vocabulary: the TTL, the start time, the settings' short names,
a clock starting at `T0` and the TTL config the scenarios vary (processing time, no
background cleanup unless a test adds one)."""

from __future__ import annotations

from typing import Any

from barrierflow.state import StateTtlConfig, Time
from support.clocks import ManualClock

TTL = 100
T0 = 1_000
ON_READ = StateTtlConfig.UpdateType.OnReadAndWrite
ON_WRITE = StateTtlConfig.UpdateType.OnCreateAndWrite
NEVER = StateTtlConfig.StateVisibility.NeverReturnExpired
RETURN_EXPIRED = StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp


def clock_at(now: int = T0) -> ManualClock:
    """A manual processing-time clock at `now` (milliseconds)."""
    return ManualClock(now)


def config(
    update: StateTtlConfig.UpdateType = ON_WRITE,
    visibility: StateTtlConfig.StateVisibility = NEVER,
    ttl: int = TTL,
) -> StateTtlConfig.Builder:
    """A processing-time TTL of `ttl` ms with no background cleanup (tests add their own)."""
    return (
        StateTtlConfig.new_builder(Time.milliseconds(ttl))
        .set_update_type(update)
        .set_state_visibility(visibility)
        .set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)
        .disable_cleanup_in_background()
    )


def with_ttl(descriptor: Any, builder: StateTtlConfig.Builder | None) -> Any:
    """`descriptor` with the TTL `builder` builds, or as it is when there is none."""
    if builder is not None:
        descriptor.enable_time_to_live(builder.build())
    return descriptor
