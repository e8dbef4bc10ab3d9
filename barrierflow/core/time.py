"""`Duration`, PyFlink's way of writing time spans, and `MAX_TIMESTAMP`, the end of time."""

from __future__ import annotations

from dataclasses import dataclass

MAX_TIMESTAMP = 2**63 - 1
"""The end of time in milliseconds (Flink's Long.MAX_VALUE): the global window's max
timestamp, the largest timer timestamp, the watermark at the end of input."""


@dataclass(frozen=True, order=True)
class Duration:
    """A span of time with millisecond precision.

    >>> Duration.of_seconds(5).to_milliseconds()
    5000
    """

    millis: int

    def __post_init__(self) -> None:
        if self.millis < 0:
            raise ValueError(f"a Duration cannot be negative, got {self.millis} ms")

    @staticmethod
    def of_millis(millis: int) -> Duration:
        return Duration(int(millis))

    @staticmethod
    def of_seconds(seconds: float) -> Duration:
        return Duration(int(seconds * 1000))

    @staticmethod
    def of_minutes(minutes: float) -> Duration:
        return Duration(int(minutes * 60_000))

    @staticmethod
    def of_hours(hours: float) -> Duration:
        return Duration(int(hours * 3_600_000))

    @staticmethod
    def of_days(days: float) -> Duration:
        return Duration(int(days * 86_400_000))

    def to_milliseconds(self) -> int:
        return self.millis


def to_millis(value: int | Duration, what: str) -> int:
    """Accept PyFlink's two spellings of a time span: int milliseconds or a Duration."""
    if isinstance(value, Duration):
        return value.millis
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be milliseconds (int) or a Duration, got {value!r}")
    return value


class Time:
    """PyFlink's `pyflink.common.Time` (`Time.seconds(10)`, `Time(5000)`): windows,
    triggers, session gaps, allowed lateness, watermarks, async timeouts and state TTL
    take it wherever they take a `Duration`, because it makes one.

    >>> Time.minutes(1) == Duration.of_seconds(60)
    True
    >>> Time(5000).to_milliseconds()
    5000
    """

    def __new__(cls, milliseconds: int) -> Duration:  # type: ignore[misc]
        return Duration.of_millis(milliseconds)

    @staticmethod
    def milliseconds(milliseconds: int) -> Duration:
        return Duration.of_millis(milliseconds)

    @staticmethod
    def seconds(seconds: float) -> Duration:
        return Duration.of_seconds(seconds)

    @staticmethod
    def minutes(minutes: float) -> Duration:
        return Duration.of_minutes(minutes)

    @staticmethod
    def hours(hours: float) -> Duration:
        return Duration.of_hours(hours)

    @staticmethod
    def days(days: float) -> Duration:
        return Duration.of_days(days)


@dataclass(frozen=True)
class Instant:
    """A point on the time line (PyFlink's `Instant`, the value of `Types.INSTANT()`):
    seconds since the epoch and nanoseconds within the second.

    >>> Instant.of_epoch_milli(1_500).to_epoch_milli()
    1500
    >>> Instant.of_epoch_milli(-1)
    Instant<-1, 999000000>
    """

    seconds: int
    nanos: int

    @staticmethod
    def of_epoch_milli(epoch_milli: int) -> Instant:
        return Instant(epoch_milli // 1000, epoch_milli % 1000 * 1_000_000)

    def to_epoch_milli(self) -> int:
        return self.seconds * 1000 + self.nanos // 1_000_000

    def __repr__(self) -> str:
        return f"Instant<{self.seconds}, {self.nanos}>"
