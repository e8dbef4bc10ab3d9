"""RecordBatch: the columnar unit in which records travel through chains and channels.

Records move in batches so Python pays one call per batch, not per record. A batch
is a list of values and, when the records carry event time, a parallel list of
timestamps (milliseconds). `timestamps is None` is the fast path of streams without
event time: nothing per record is added.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["NO_TIMESTAMP", "RecordBatch"]

NO_TIMESTAMP = -(2**63)
"""The timestamp of a record that has none, inside a batch whose others have one
(Flink passes Long.MIN_VALUE as `record_timestamp` for such records)."""


@dataclass(slots=True)
class RecordBatch:
    """Values and, optionally, one event timestamp per value (same length).

    Mailbox thread only; a batch handed to an operator or output belongs to it (it may
    be kept or changed), so a producer never reuses a batch it has emitted.

    >>> batch = RecordBatch(["a", "b"], [10, 20])
    >>> len(batch), list(batch.records())
    (2, [('a', 10), ('b', 20)])
    >>> list(RecordBatch(["c"]).records())
    [('c', None)]
    """

    values: list[Any]
    timestamps: list[int] | None = None
    """None: no record has a timestamp; otherwise `NO_TIMESTAMP` marks one that has none."""

    def __len__(self) -> int:
        return len(self.values)

    def records(self) -> Any:
        """(value, timestamp or None) pairs, for tests and slow paths."""
        if self.timestamps is None:
            return ((value, None) for value in self.values)
        return (
            (value, None if ts == NO_TIMESTAMP else ts)
            for value, ts in zip(self.values, self.timestamps, strict=True)
        )
