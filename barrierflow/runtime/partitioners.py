"""How a batch of records is split over the channels of one job edge.

`route(batch, channel_count)` returns one (channel, records) pair per non-empty
part; `route_with_timestamps(values, timestamps, channel_count)` does the same for
a batch whose records carry event timestamps, returning (channel, values,
timestamps) triples with the timestamps still beside their records;
`route_columnar(batch, channel_count)` splits a `ColumnarBatch` into (channel,
ColumnarBatch) pairs without making Python rows where it can: forward and broadcast
pass the batch on, rebalance cuts it into contiguous zero-copy slices (round-robin over
channels, continuing where the previous batch stopped), hash computes each row's
channel and takes each channel's rows in one `take` (order kept within a channel); keyed
by a column (`key_by("auction")`, a `ColumnKey`) it hashes the column vectorized
(`state/key_group_arrays.py`: the very key groups the Python values get).
Channel i of an edge leads to downstream subtask i, except for FORWARD,
whose single channel leads to the subtask with the sender's own index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from barrierflow.core.column_key import ColumnKey
from barrierflow.core.functions import as_callable
from barrierflow.runtime.columnar import ColumnarBatch
from barrierflow.state.key_group_arrays import key_groups_of_array
from barrierflow.state.key_groups import assign_to_key_groups


class Partitioner:
    """A strategy for one edge; picklable, shipped to the sending tasks."""

    name = ""
    is_pointwise = False
    """True when each sender talks to exactly one receiver (the same index)."""

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        raise NotImplementedError

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        """Like `route`, keeping each record's timestamp beside it."""
        raise NotImplementedError

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        """Like `route`, for a columnar batch: each part a ColumnarBatch (slices or takes)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name.upper()


class ForwardPartitioner(Partitioner):
    name = "forward"
    is_pointwise = True

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        return [(0, batch)]

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        return [(0, values, timestamps)]

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        return [(0, batch)]


class BroadcastPartitioner(Partitioner):
    name = "broadcast"

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        return [(channel, batch) for channel in range(channel_count)]

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        return [(channel, values, timestamps) for channel in range(channel_count)]

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        return [(channel, batch) for channel in range(channel_count)]


class RebalancePartitioner(Partitioner):
    """Round-robin per record, continuing where the previous batch stopped."""

    name = "rebalance"

    def __init__(self) -> None:
        self._next = 0

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        start = self._next
        self._next = (start + len(batch)) % channel_count
        parts = []
        for offset in range(min(channel_count, len(batch))):
            parts.append(((start + offset) % channel_count, batch[offset::channel_count]))
        return parts

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        return [
            (channel, part, timestamps[offset::channel_count])
            for offset, (channel, part) in enumerate(self.route(values, channel_count))
        ]

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        """Contiguous slices, one per channel (fewer for a batch shorter than the channels)."""
        rows = len(batch)
        pieces = min(channel_count, rows)
        start = self._next
        self._next = (start + pieces) % channel_count
        size, extra = divmod(rows, pieces) if pieces else (0, 0)
        parts, first = [], 0
        for offset in range(pieces):
            last = first + size + (1 if offset < extra else 0)
            parts.append(((start + offset) % channel_count, batch.slice(first, last)))
            first = last
        return parts


class _PerRecordPartitioner(Partitioner):
    """A partitioner that picks each record's channel by `_channels` (hash, shuffle, custom)."""

    def _channels(self, values: list[Any], channel_count: int) -> list[int]:
        raise NotImplementedError

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        parts: list[list[Any]] = [[] for _ in range(channel_count)]
        for value, channel in zip(batch, self._channels(batch, channel_count), strict=True):
            parts[channel].append(value)
        return [(channel, part) for channel, part in enumerate(parts) if part]

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        parts: list[list[Any]] = [[] for _ in range(channel_count)]
        stamps: list[list[int]] = [[] for _ in range(channel_count)]
        channels = self._channels(values, channel_count)
        for value, timestamp, channel in zip(values, timestamps, channels, strict=True):
            parts[channel].append(value)
            stamps[channel].append(timestamp)
        return [(channel, part, stamps[channel]) for channel, part in enumerate(parts) if part]

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        channels = np.array(self._channels(batch.values, channel_count), dtype=np.int64)
        return split_columnar(batch, channels, channel_count)


@dataclass
class KeyGroupStreamPartitioner(_PerRecordPartitioner):
    """Sends each record to the subtask owning its key's key group (stable across processes)."""

    key_selector: Any
    max_parallelism: int
    name: str = field(default="hash", init=False)

    def __post_init__(self) -> None:
        self._get_key = as_callable(self.key_selector, "get_key", "KeySelector")

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        if channel_count == 1:  # no key to hash
            return [(0, batch)] if batch else []
        return super().route(batch, channel_count)

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        if channel_count == 1:
            return [(0, values, timestamps)] if values else []
        return super().route_with_timestamps(values, timestamps, channel_count)

    def _channels(self, values: list[Any], channel_count: int) -> list[int]:
        max_p = self.max_parallelism
        groups = assign_to_key_groups(map(self._get_key, values), max_p)
        return [group * channel_count // max_p for group in groups]

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        return split_columnar(batch, self.channels_of(batch, channel_count), channel_count)

    def channels_of(self, batch: ColumnarBatch, channel_count: int) -> np.ndarray:
        """The channel of every row of `batch` (int64)."""
        max_p = self.max_parallelism
        selector = self.key_selector
        if isinstance(selector, ColumnKey):
            index = batch.data.schema.get_field_index(selector.name)
            if index < 0:
                raise KeyError(
                    f"key_by({selector.name!r}): the records have no column {selector.name!r}; "
                    f"their columns are {batch.data.schema.names}"
                )
            groups = key_groups_of_array(batch.data.column(index), max_p)
        else:
            groups = np.array(
                assign_to_key_groups(map(self._get_key, batch.values), max_p), dtype=np.int64
            )
        return groups * channel_count // max_p

    def __repr__(self) -> str:
        return "HASH"


def split_columnar(
    batch: ColumnarBatch, channels: np.ndarray, channel_count: int
) -> list[tuple[int, ColumnarBatch]]:
    """`batch` cut by each row's channel (int64): one `take` per batch, order kept within a
    channel."""
    if len(channels) == 0:
        return []
    first = int(channels[0])
    if (channels == first).all():
        return [(first, batch)]
    order = np.argsort(channels, kind="stable")
    counts = np.bincount(channels, minlength=channel_count)
    taken = batch.take(order)
    parts, start = [], 0
    for channel, count in enumerate(counts.tolist()):
        if count:
            parts.append((channel, taken.slice(start, start + count)))
            start += count
    return parts


class ShufflePartitioner(_PerRecordPartitioner):
    """Each record to a uniformly random channel (PyFlink's `shuffle()`)."""

    name = "shuffle"

    def __init__(self) -> None:
        self._random = np.random.default_rng()

    def _channels(self, values: list[Any], channel_count: int) -> list[int]:
        return self._random.integers(0, channel_count, len(values)).tolist()

    def route_columnar(
        self, batch: ColumnarBatch, channel_count: int
    ) -> list[tuple[int, ColumnarBatch]]:
        channels = self._random.integers(0, channel_count, len(batch))
        return split_columnar(batch, channels, channel_count)


class RescalePartitioner(RebalancePartitioner):
    """PyFlink's `rescale()`: round-robin, as `rebalance()`.

    Flink's rescale sends each subtask's records to a local subset of the next operator's
    subtasks to stay within a TaskManager. On Spark every channel between stream tasks is a
    TCP connection whatever the executors, so there is no local subset to prefer; records
    go round-robin over all the next operator's subtasks."""

    name = "rescale"


@dataclass
class CustomPartitioner(_PerRecordPartitioner):
    """PyFlink's `partition_custom(partitioner, key_selector)`: the channel of each record is
    `partitioner.partition(key, channel_count)` (or `partitioner(key, channel_count)`)."""

    partitioner: Any
    key_selector: Any
    name: str = field(default="custom", init=False)

    def __post_init__(self) -> None:
        bound = getattr(self.partitioner, "partition", None)  # PyFlink's Partitioner class
        self._partition = bound if callable(bound) else self.partitioner
        if not callable(self._partition):
            raise TypeError(
                f"partition_custom needs a Partitioner or a function (key, num_partitions) -> "
                f"int, got {self.partitioner!r}"
            )
        self._get_key = as_callable(self.key_selector, "get_key", "KeySelector")

    def _channels(self, values: list[Any], channel_count: int) -> list[int]:
        partition, get_key = self._partition, self._get_key
        channels = [partition(get_key(value), channel_count) for value in values]
        for channel in channels:
            if isinstance(channel, bool) or not isinstance(channel, int):
                raise TypeError(
                    f"partition_custom: the partitioner returned {channel!r}, not a partition"
                )
            if not 0 <= channel < channel_count:
                raise ValueError(
                    f"partition_custom: the partitioner returned partition {channel}, "
                    f"outside 0..{channel_count - 1}"
                )
        return channels

    def __repr__(self) -> str:
        return "CUSTOM"
