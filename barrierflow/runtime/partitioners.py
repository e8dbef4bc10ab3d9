"""How a batch of records is split over the channels of one job edge.

`route(batch, channel_count)` returns one (channel, records) pair per non-empty
part; `route_with_timestamps(values, timestamps, channel_count)` does the same for
a batch whose records carry event timestamps, returning (channel, values,
timestamps) triples with the timestamps still beside their records. Channel i
of an edge leads to downstream subtask i, except for FORWARD,
whose single channel leads to the subtask with the sender's own index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from barrierflow.core.functions import as_callable
from barrierflow.state.key_groups import assign_to_key_group, subtask_for_key_group


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


class BroadcastPartitioner(Partitioner):
    name = "broadcast"

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        return [(channel, batch) for channel in range(channel_count)]

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        return [(channel, values, timestamps) for channel in range(channel_count)]


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


@dataclass
class KeyGroupStreamPartitioner(Partitioner):
    """Sends each record to the subtask owning its key's key group (stable across processes)."""

    key_selector: Any
    max_parallelism: int
    name: str = field(default="hash", init=False)

    def __post_init__(self) -> None:
        self._get_key = as_callable(self.key_selector, "get_key", "KeySelector")

    def route(self, batch: list[Any], channel_count: int) -> list[tuple[int, list[Any]]]:
        max_p, get_key = self.max_parallelism, self._get_key
        parts: list[list[Any]] = [[] for _ in range(channel_count)]
        for value in batch:
            key_group = assign_to_key_group(get_key(value), max_p)
            parts[subtask_for_key_group(max_p, channel_count, key_group)].append(value)
        return [(channel, part) for channel, part in enumerate(parts) if part]

    def route_with_timestamps(
        self, values: list[Any], timestamps: list[int], channel_count: int
    ) -> list[tuple[int, list[Any], list[int]]]:
        max_p, get_key = self.max_parallelism, self._get_key
        parts: list[list[Any]] = [[] for _ in range(channel_count)]
        stamps: list[list[int]] = [[] for _ in range(channel_count)]
        for value, timestamp in zip(values, timestamps, strict=True):
            channel = subtask_for_key_group(
                max_p, channel_count, assign_to_key_group(get_key(value), max_p)
            )
            parts[channel].append(value)
            stamps[channel].append(timestamp)
        return [(channel, part, stamps[channel]) for channel, part in enumerate(parts) if part]

    def __repr__(self) -> str:
        return "HASH"
