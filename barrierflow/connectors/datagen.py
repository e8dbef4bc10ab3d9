"""Deterministic generated input: `DataGeneratorSource` and `NumberSequenceSource`.

Record `i` is `generator(i)`. The indexes are dealt to a fixed number of splits (split `k`
makes `k, k + num_splits, k + 2 * num_splits, ...`), whatever the job's parallelism, so the
checkpointed position of every split (its next index) survives a change of parallelism.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from barrierflow.connectors.base import Source, SourceReader, SourceSplit, SplitBatch
from barrierflow.connectors.pacing import Pace
from barrierflow.errors import ConfigurationError

__all__ = [
    "Clock",
    "DataGeneratorReader",
    "DataGeneratorSource",
    "NumberSequenceSource",
]

Clock = Callable[[], float]
"""Seconds from an arbitrary start, never going back (`time.monotonic`)."""


class DataGeneratorSource(Source):
    """Emits `generator(i)` for each `i` in `range(count)` exactly once (forever if count is None).

    Exactly-once because each split's position is its next index, stored in every checkpoint;
    assumes `generator` is deterministic. With `records_per_second`, the whole source stays
    at or under that rate (each reader takes its splits' share of it).

    >>> source = DataGeneratorSource(lambda i: i * i, 6, num_splits=2)
    >>> reader = source.create_reader(source.create_splits())
    >>> reader.restore({})
    >>> reader.poll_batch(4), reader.poll_batch(4), reader.poll_batch(4)
    ([0, 1, 4, 9], [16, 25], None)
    """

    def __init__(
        self,
        generator: Callable[[int], Any],
        count: int | None,
        records_per_second: float | None = None,
        num_splits: int = 8,
        *,
        clock: Clock = time.monotonic,
    ) -> None:
        if not callable(generator):
            raise ConfigurationError(f"generator must be callable, got {type(generator).__name__}")
        if count is not None and (not _is_int(count) or count < 0):
            raise ConfigurationError(f"count must be None or an int >= 0, got {count!r}")
        if records_per_second is not None and not (
            isinstance(records_per_second, int | float)
            and not isinstance(records_per_second, bool)
            and 0 < records_per_second < math.inf
        ):
            raise ConfigurationError(
                f"records_per_second must be None or a positive number, got {records_per_second!r}"
            )
        if not _is_int(num_splits) or num_splits < 1:
            raise ConfigurationError(f"num_splits must be an int >= 1, got {num_splits!r}")
        self.generator = generator
        self.count = count
        self.records_per_second = Source.pace(records_per_second)
        """None in the failure-free run of `barrierflow chaos` (`Source.pace`)."""
        self.num_splits = num_splits
        self.clock = clock
        self.bounded = count is not None

    def create_splits(self) -> list[SourceSplit]:
        # The number of splits is in the id: positions of a different split count never apply.
        n = self.num_splits
        return [SourceSplit(f"{k}-of-{n}", k) for k in range(n)]

    def create_reader(self, splits: Sequence[SourceSplit]) -> DataGeneratorReader:
        rate = None
        if self.records_per_second is not None:
            rate = self.records_per_second * len(splits) / self.num_splits
        return DataGeneratorReader(
            self.generator, self.count, self.num_splits, splits, rate, self.clock
        )


class NumberSequenceSource(DataGeneratorSource):
    """The integers from `start` to `end`, both included, each exactly once (PyFlink's name).

    >>> source = NumberSequenceSource(5, 9)
    >>> reader = source.create_reader(source.create_splits())
    >>> reader.poll_batch(100)
    [5, 6, 7, 8, 9]
    """

    def __init__(self, start: int, end: int, *, num_splits: int = 8) -> None:
        if not (_is_int(start) and _is_int(end)) or start > end:
            raise ConfigurationError(
                f"NumberSequenceSource needs ints with start <= end, got {start!r} and {end!r}"
            )
        super().__init__(_Offset(start), end - start + 1, num_splits=num_splits)
        self.start = start
        self.end = end


class DataGeneratorReader(SourceReader):
    """Makes the records of its splits, interleaved in index order. Mailbox thread only.

    Exactly-once: its snapshot is the next index of every split. Throttled readers return
    `[]` while ahead of schedule; one that fell behind (backpressure) catches up by at most
    `pacing.BACKLOG_SECONDS` worth of records, so the rate stays a ceiling.
    """

    def __init__(
        self,
        generator: Callable[[int], Any],
        count: int | None,
        num_splits: int,
        splits: Sequence[SourceSplit],
        records_per_second: float | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        self._generator = generator
        self._count = count
        self._stride = num_splits
        self._positions: dict[str, int] = {split.split_id: int(split.payload) for split in splits}
        self._pace = None if records_per_second is None else Pace(records_per_second, clock=clock)

    def restore(self, positions: dict[str, Any]) -> None:
        for split_id in self._positions:
            if split_id in positions:
                self._positions[split_id] = int(positions[split_id])

    def poll_batch(self, max_records: int) -> list[Any] | None:
        count = self._count
        active = sorted(
            (position, split_id)
            for split_id, position in self._positions.items()
            if count is None or position < count
        )
        if not active:
            return None
        wanted = self._allowed(max_records)
        if wanted <= 0:
            return []
        base, extra = divmod(wanted, len(active))
        stride, indexes = self._stride, []
        for rank, (position, split_id) in enumerate(active):
            take = base + (1 if rank < extra else 0)
            if take == 0:
                break
            if count is not None:
                take = min(take, -((position - count) // stride))  # ceil((count - pos) / stride)
            end = position + take * stride
            indexes.extend(range(position, end, stride))
            self._positions[split_id] = end
        indexes.sort()
        self._took(len(indexes))
        return list(map(self._generator, indexes))

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def split_ids(self) -> list[str]:
        return list(self._positions)

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        """The next records of the split furthest behind (one split per batch)."""
        count = self._count
        active = [
            (position, split_id)
            for split_id, position in self._positions.items()
            if count is None or position < count
        ]
        if not active:
            return None
        position, split_id = min(active)
        wanted = self._allowed(max_records)
        if wanted <= 0:
            return SplitBatch(split_id, [])
        stride = self._stride
        if count is not None:
            wanted = min(wanted, -((position - count) // stride))
        end = position + wanted * stride
        self._positions[split_id] = end
        self._took(wanted)
        finished = count is not None and end >= count
        records = list(map(self._generator, range(position, end, stride)))
        return SplitBatch(split_id, records, finished=finished)

    def _allowed(self, max_records: int) -> int:
        """How many records may go out now: `max_records`, or fewer to keep to the rate."""
        return max_records if self._pace is None else self._pace.allowed(max_records)

    def _took(self, records: int) -> None:
        if self._pace is not None:
            self._pace.took(records)


class _Offset:
    """`i -> start + i`, picklable."""

    def __init__(self, start: int) -> None:
        self.start = start

    def __call__(self, index: int) -> int:
        return self.start + index


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
