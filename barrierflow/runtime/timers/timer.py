"""A timer, its deterministic order, and what a timer calls back (Flink's InternalTimer)."""

from __future__ import annotations

import operator
import pickle
from collections.abc import Hashable
from typing import Any, NamedTuple, Protocol

from barrierflow.core.time import MAX_TIMESTAMP

MIN_WATERMARK = -(2**63)
"""The watermark before any has arrived (Flink's Long.MIN_VALUE)."""

_PICKLE_PROTOCOL = 5


def order_key(value: Any) -> tuple:
    """A total, process-independent order over user keys and namespaces.

    None < numbers < str < bytes < tuples (element by element) < anything else,
    which is ordered by its type's qualified name and then its pickled bytes. The
    result is the same in every process (Python's `hash()` is never used), except
    for values whose pickle depends on it (sets or dicts of str inside an object):
    timers of equal timestamp with such keys may fire in another order in another run.
    """
    kind = type(value)
    if kind is int or kind is str:
        return (2 if kind is int else 3, value)
    if value is None:
        return (0,)
    if kind is float or kind is bool:
        return (2, value)
    if kind is bytes:
        return (4, value)
    if isinstance(value, tuple):
        return (5, tuple(order_key(item) for item in value))
    return (
        6,
        f"{kind.__module__}.{kind.__qualname__}",
        pickle.dumps(value, protocol=_PICKLE_PROTOCOL),
    )


class Timer(NamedTuple):
    """One registered timer: fires for `key` in `namespace` at `timestamp` (ms).

    Immutable. Equal (and deduplicated) when timestamp, key and namespace are equal.
    Ordered by timestamp, then key, then namespace, in an order that is the same in
    every process, so timers with equal timestamps fire in the same order after a
    restore. (A NamedTuple because hashing and equality then run in C.)

    >>> timers = [Timer(5, "b", None), Timer(5, "a", None), Timer(1, "z", None)]
    >>> [(t.timestamp, t.key) for t in sorted(timers)]
    [(1, 'z'), (5, 'a'), (5, 'b')]
    """

    timestamp: int
    key: Hashable
    namespace: Hashable

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Timer):
            return NotImplemented
        return sort_key(self) < sort_key(other)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Timer):
            return NotImplemented
        return sort_key(self) <= sort_key(other)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Timer):
            return NotImplemented
        return sort_key(self) > sort_key(other)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Timer):
            return NotImplemented
        return sort_key(self) >= sort_key(other)


def sort_key(timer: Timer) -> tuple:
    return (timer[0], order_key(timer[1]), order_key(timer[2]))


def tie_order(timer: Timer) -> tuple:
    """The order among timers of one timestamp."""
    return (order_key(timer[1]), order_key(timer[2]))


new_timer = tuple.__new__
"""`new_timer(Timer, (timestamp, key, namespace))`: NamedTuple's constructor without its
Python-level `__new__`, twice as fast on the registration path."""


class Triggerable(Protocol):
    """What the service calls back when a timer is due (the keyed operator)."""

    def on_event_time(self, timer: Timer) -> None:
        """Called when the watermark passes `timer.timestamp`."""

    def on_processing_time(self, timer: Timer) -> None:
        """Called when processing time reaches `timer.timestamp`."""


def checked_timestamp(timestamp: int) -> int:
    """`timestamp` as an int in Flink's long range, or a ValueError/TypeError."""
    timestamp = operator.index(timestamp)
    if not MIN_WATERMARK <= timestamp <= MAX_TIMESTAMP:
        raise ValueError(f"timestamp {timestamp} is outside the 64-bit range")
    return timestamp
