"""Q5 (hot items): the auctions with the most bids in each 10 s window sliding by 2 s.

flink-nexmark counts each auction's bids per HOP window and joins the counts with each
window's maximum, keeping every auction at the maximum (ties included). Built in three
windowed steps, slicing the way Flink's SQL runtime does (a bid updates one 2 s slice, not
the five windows it is in):

1. bids keyed by auction, counted per 2 s slice (tumbling event-time windows, `CountBids`);
2. the slice counts, still keyed by auction, summed in sliding windows of 10 s every 2 s
   (a slice lies wholly inside a window or outside it: its count carries its last instant
   as timestamp), each sum tagged with its window's end (`SumCounts`, `AuctionCount`);
3. the sums keyed by window end, gathered by a tumbling window of the slide (a window's
   results carry its end - 1 as timestamp, so exactly one tumbling window holds them) and
   reduced to the auctions at the maximum (`MostBids`, emitted by `AuctionsAtMax`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.nexmark.model import Bid
from barrierflow.window import SlidingEventTimeWindows, TumblingEventTimeWindows

__all__ = ["COLUMNS", "UPDATING", "AuctionCount", "MostBids", "SumCounts", "build"]

COLUMNS = ("auction", "num")
UPDATING = False

WINDOW = Duration.of_seconds(10)
SLIDE = Duration.of_seconds(2)


class SliceCount(NamedTuple):
    """One auction's bid count in one 2 s slice."""

    auction: int
    num: int


class WindowCount(NamedTuple):
    """One auction's bid count in the window that ends at `window_end`."""

    window_end: int
    auction: int
    num: int


class CountBids(AggregateFunction):
    """How many bids a slice holds."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


class AuctionSlice(ProcessWindowFunction):
    """The auction's count in the slice."""

    def process(self, auction: int, context: Any, counts: Any) -> Any:
        for num in counts:
            yield SliceCount(auction, num)


class SumCounts(AggregateFunction):
    """The sum of a window's slice counts."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: SliceCount, accumulator: int) -> int:
        return accumulator + value.num

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


class AuctionCount(ProcessWindowFunction):
    """The auction's count, tagged with its window's end."""

    def process(self, auction: int, context: Any, counts: Any) -> Any:
        for num in counts:
            yield WindowCount(context.window().end, auction, num)


class MostBids(AggregateFunction):
    """The highest count of a window and the auctions that have it, as [num, [auctions]].

    >>> most = MostBids()
    >>> accumulator = most.create_accumulator()
    >>> for count in [WindowCount(10, 1, 3), WindowCount(10, 2, 5), WindowCount(10, 3, 5)]:
    ...     accumulator = most.add(count, accumulator)
    >>> most.get_result(accumulator)
    [5, [2, 3]]
    """

    def create_accumulator(self) -> list[Any]:
        return [0, []]

    def add(self, value: WindowCount, accumulator: list[Any]) -> list[Any]:
        if value.num > accumulator[0]:
            return [value.num, [value.auction]]
        if value.num == accumulator[0]:
            accumulator[1].append(value.auction)
        return accumulator

    def get_result(self, accumulator: list[Any]) -> list[Any]:
        return accumulator

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        if acc_a[0] != acc_b[0]:
            return acc_a if acc_a[0] > acc_b[0] else acc_b
        return [acc_a[0], acc_a[1] + acc_b[1]]


class AuctionsAtMax(ProcessWindowFunction):
    """One row per auction at the window's highest count."""

    def process(self, window_end: int, context: Any, results: Any) -> Any:
        for num, auctions in results:
            for auction in auctions:
                yield {"auction": auction, "num": num}


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def auction_of(bid: Bid) -> int:
    return bid.auction


def window_end_of(count: WindowCount) -> int:
    return count.window_end


def slice_auction(count: SliceCount) -> int:
    return count.auction


def build(events: DataStream) -> DataStream:
    slices = (
        events.filter(is_bid)
        .key_by(auction_of)
        .window(TumblingEventTimeWindows.of(SLIDE))
        .aggregate(CountBids(), AuctionSlice())
        .uid("q5-slices")
    )
    counts = (
        slices.key_by(slice_auction)
        .window(SlidingEventTimeWindows.of(WINDOW, SLIDE))
        .aggregate(SumCounts(), AuctionCount())
        .uid("q5-count")
    )
    return (
        counts.key_by(window_end_of)
        .window(TumblingEventTimeWindows.of(SLIDE))
        .aggregate(MostBids(), AuctionsAtMax())
        .uid("q5-max")
    )
