"""Q5 (hot items): the auctions with the most bids in each 10 s window sliding by 2 s.

flink-nexmark counts each auction's bids per HOP window and joins the counts with each
window's maximum, keeping every auction at the maximum (ties included). Built the way
Flink's SQL runtime slices a HOP window (a bid updates one 2 s slice, not the five windows
it is in), with the counting done on arrays rather than one Python call per bid or per
auction:

0. `slice_counts` (`map_batches`): a batch's bids counted per (2 s slice, auction) with
   Arrow's group-by, one row per slice in the batch holding its auctions and their counts
   as lists, stamped with the slice's earliest bid's time;
1. those rows keyed by slice start, in tumbling event-time windows of 2 s (`SliceTotals`):
   each slice's counts summed over the batches into one `AuctionCounts` (two arrays),
   emitted with the slice's last instant as timestamp;
2. the slices, all under one key (one record per 2 s of event time), in sliding event-time
   windows of 10 s every 2 s (a slice lies wholly inside a window or outside it): `HotItems`
   sums a window's five slices per auction and keeps the auctions at the maximum, which
   `AuctionsAtMax` writes as rows.

Exact: a row of step 0 stands for bids of one slice, whose one tumbling window decides for
all of them (lateness is the window's, not the bid's), and the watermark does not move
within a batch (the window operator takes each arriving frame at one watermark, and one
batch's rows for one channel travel in one frame), so a row does what its bids would have
done one by one. Counts are int64 sums, never floats.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Bid
>>> from barrierflow.nexmark.queries._columns import with_event_times
>>> events = record_batch_of([
...     Bid(auction, 1, 10, "Google", "", time, "")
...     for auction, time in [(7, 1_999), (8, 500), (7, 2_000), (7, 1_000)]
... ])
>>> slice_counts(with_event_times(events)).to_pylist()  # doctest: +NORMALIZE_WHITESPACE
[{'slice': 0, 'auctions': [7, 8], 'nums': [2, 1], '_timestamp': 500},
 {'slice': 2000, 'auctions': [7], 'nums': [1], '_timestamp': 2000}]
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.nexmark.queries._columns import (
    EVENT_TIME,
    bids_of,
    column,
    event_times_of,
    window_starts,
)
from barrierflow.window import SlidingEventTimeWindows, TumblingEventTimeWindows

__all__ = [
    "COLUMNS",
    "UPDATING",
    "AuctionCounts",
    "AuctionsAtMax",
    "HotItems",
    "SliceTotals",
    "build",
    "slice_counts",
    "summed",
]

COLUMNS = ("auction", "num")
UPDATING = False

WINDOW = Duration.of_seconds(10)
SLIDE = Duration.of_seconds(2)
SLIDE_MS = 2_000


class AuctionCounts(NamedTuple):
    """Bid counts per auction: `nums[i]` bids on `auctions[i]` (int64 arrays, auctions
    distinct)."""

    auctions: np.ndarray
    nums: np.ndarray


def slice_counts(events: pa.RecordBatch) -> pa.RecordBatch:
    """The bids among `events` counted per (2 s slice, auction): one row per slice, with
    columns slice (its start), auctions and nums (lists, auctions distinct) and
    `_timestamp`, the earliest of the slice's bids' times."""
    bids = bids_of(events)
    times = event_times_of(bids)
    counts = (
        pa.table(
            {
                "slice": window_starts(times, SLIDE_MS),
                "auction": column(bids, "auction"),
                EVENT_TIME: times,
            }
        )
        .group_by(["slice", "auction"], use_threads=False)
        .aggregate([([], "count_all"), (EVENT_TIME, "min")])
        .sort_by("slice")
        .combine_chunks()
    )
    slices = counts.column("slice").to_numpy()
    firsts = np.flatnonzero(np.r_[True, slices[1:] != slices[:-1]]) if len(slices) else []
    offsets = pa.array(np.r_[firsts, len(slices)], pa.int32())
    return pa.RecordBatch.from_arrays(
        [
            pa.array(slices[firsts], pa.int64()),
            pa.ListArray.from_arrays(offsets, counts.column("auction").chunk(0)),
            pa.ListArray.from_arrays(offsets, counts.column("count_all").chunk(0)),
            pa.array(
                np.minimum.reduceat(counts.column(f"{EVENT_TIME}_min").to_numpy(), firsts)
                if len(slices)
                else [],
                pa.int64(),
            ),
        ],
        names=["slice", "auctions", "nums", EVENT_TIME],
    )


def summed(auctions: Any, nums: Any) -> AuctionCounts:
    """The counts per auction, summed (int64): auctions may repeat in the input.

    >>> summed([3, 1, 3], [1, 2, 5])
    AuctionCounts(auctions=array([3, 1]), nums=array([6, 2]))
    """
    sums = (
        pa.table({"auction": pa.array(auctions, pa.int64()), "num": pa.array(nums, pa.int64())})
        .group_by("auction", use_threads=False)
        .aggregate([("num", "sum")])
    )
    return AuctionCounts(sums.column("auction").to_numpy(), sums.column("num_sum").to_numpy())


def _concatenated(parts: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    auctions = np.concatenate([np.asarray(part[0], np.int64) for part in parts])
    nums = np.concatenate([np.asarray(part[1], np.int64) for part in parts])
    return auctions, nums


class SliceTotals(AggregateFunction):
    """A slice's counts per auction, summed over the `slice_counts` rows of its batches."""

    def create_accumulator(self) -> list[Any]:
        return []

    def add(self, value: dict[str, Any], accumulator: list[Any]) -> list[Any]:
        accumulator.append((value["auctions"], value["nums"]))
        return accumulator

    def get_result(self, accumulator: list[Any]) -> AuctionCounts:
        return summed(*_concatenated(accumulator))

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        return acc_a + acc_b


class HotItems(AggregateFunction):
    """A window's counts per auction (the sum of its slices') reduced to the auctions at the
    highest count.

    >>> hot = HotItems()
    >>> accumulator = hot.create_accumulator()
    >>> for counts in [summed([1, 2], [3, 5]), summed([3, 1], [5, 1])]:
    ...     accumulator = hot.add(counts, accumulator)
    >>> hot.get_result(accumulator)
    AuctionCounts(auctions=array([2, 3]), nums=array([5, 5]))
    """

    def create_accumulator(self) -> list[AuctionCounts]:
        return []

    def add(self, value: AuctionCounts, accumulator: list[AuctionCounts]) -> list[AuctionCounts]:
        accumulator.append(value)
        return accumulator

    def get_result(self, accumulator: list[AuctionCounts]) -> AuctionCounts:
        counts = summed(*_concatenated(accumulator))
        at_max = counts.nums == counts.nums.max()
        return AuctionCounts(counts.auctions[at_max], counts.nums[at_max])

    def merge(self, acc_a: list[AuctionCounts], acc_b: list[AuctionCounts]) -> list[Any]:
        return acc_a + acc_b


class AuctionsAtMax(ProcessWindowFunction):
    """One row per auction at the window's highest count."""

    def process(self, key: int, context: Any, results: Any) -> Any:
        for counts in results:
            for auction, num in zip(counts.auctions.tolist(), counts.nums.tolist(), strict=True):
                yield {"auction": auction, "num": num}


def one_key(counts: AuctionCounts) -> int:
    """Every slice under one key: a window needs all of its five slices."""
    return 0


def build(events: DataStream) -> DataStream:
    slices = (
        events.map_batches(slice_counts)
        .name("q5-bid-counts")
        .key_by("slice")
        .window(TumblingEventTimeWindows.of(SLIDE))
        .aggregate(SliceTotals())
        .uid("q5-slices")
    )
    return (
        slices.key_by(one_key)
        .window(SlidingEventTimeWindows.of(WINDOW, SLIDE))
        .aggregate(HotItems(), AuctionsAtMax())
        .uid("q5-max")
    )
