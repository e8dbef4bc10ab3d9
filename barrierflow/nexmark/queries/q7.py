"""Q7 (highest bid): the bids at each 10 s window's highest price, its end instant included.

flink-nexmark joins every bid with each window's highest price on `price = maxprice AND
dateTime BETWEEN window_end - 10 s AND window_end`, both ends inclusive: a bid at a whole
multiple of 10 s is the first instant of one window (where it counts towards the highest)
and the last of the window before (where it only matches). Built in two steps, after
`MayBeHighest` (a `map_batches` step, on Arrow columns) keeps the bids of a batch that may
be at their window's highest price (the bids at whole multiples of 10 s, and the others at
no less than the highest price this subtask passed in their window, this batch included)
as rows with flink-nexmark's columns:

1. bids keyed by auction, in sliding event-time windows of 10 s + 1 ms every 10 s, so each
   window also sees the bids at its end; `HighestBids` keeps the highest bids and sets
   aside those at whole multiples of 10 s, which `AuctionHighest` sorts out once it knows
   the window (start: they count; end: they only match);
2. those parts keyed by window end; `WindowHighest` merges them and, once the watermark
   reaches the window's end, emits the bids at the highest price.

Exact: a bid is dropped only below another bid of its one window (a bid not at a whole
multiple of 10 s is in one window) that went on before it or with it, which reaches the
window, so the dropped bid could be neither at the window's highest price nor matched.
(With bids that come late, behind the watermark, the plain query's answer too depends on
when each window operator's watermark moves: that other bid may be late where it goes.)

Columns: flink-nexmark's INSERT lists `B.price, B.bidder` where its sink table has
`bidder, price`, so that sink's `bidder` column receives the price; here each column holds
what it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from barrierflow import DataStream
from barrierflow.functions import AggregateFunction, KeyedProcessFunction, ProcessWindowFunction
from barrierflow.nexmark.queries._columns import bids_of, column, rows
from barrierflow.state import ValueStateDescriptor
from barrierflow.window import SlidingEventTimeWindows

__all__ = [
    "COLUMNS",
    "UPDATING",
    "AuctionHighest",
    "Highest",
    "HighestBids",
    "MayBeHighest",
    "WindowHighest",
    "WindowPart",
    "build",
]

COLUMNS = ("auction", "bidder", "price", "dateTime", "extra")
UPDATING = False

SIZE = 10_000
"""The tumbling window's size (ms)."""

BidRow = dict[str, Any]
"""A bid as a row: flink-nexmark's columns (`COLUMNS`)."""


def a_bid(price: int, date_time: int = 1, auction: int = 1, bidder: int = 2) -> BidRow:
    """A bid row (for examples and tests)."""
    return {
        "auction": auction,
        "bidder": bidder,
        "price": price,
        "dateTime": date_time,
        "extra": "",
    }


@dataclass(slots=True)
class Highest:
    """The highest price of some bids and the bids at that price (-1: no bid yet).

    >>> highest = Highest()
    >>> for price in (5, 7, 3, 7):
    ...     highest.add(a_bid(price))
    >>> highest.price, len(highest.bids)
    (7, 2)
    """

    price: int = -1
    bids: list[BidRow] = field(default_factory=list)

    def add(self, bid: BidRow) -> None:
        price = bid["price"]
        if price > self.price:
            self.price = price
            self.bids = [bid]
        elif price == self.price:
            self.bids.append(bid)

    def merge(self, other: Highest) -> None:
        if other.price > self.price:
            self.price = other.price
            self.bids = list(other.bids)
        elif other.price == self.price:
            self.bids.extend(other.bids)


@dataclass(slots=True)
class Candidates:
    """A window's bids so far: the highest of those inside, and those at its edges."""

    highest: Highest = field(default_factory=Highest)
    edges: list[BidRow] = field(default_factory=list)
    """Bids at a whole multiple of SIZE: the window's first or its last instant."""


@dataclass(slots=True)
class WindowPart:
    """One auction's share of the window ending at `window_end`."""

    window_end: int
    highest: Highest
    at_end: list[BidRow]
    """Bids at `window_end` itself, as high as `highest` (they match, but do not count)."""


class MayBeHighest:
    """The `map_batches` function: the bids of a batch that may be at their window's
    highest price, as rows with flink-nexmark's columns (and their event time): those at
    whole multiples of SIZE, and the others at no less than the highest price this subtask
    passed in their window, this batch's included.

    What it remembers is an optimization, not state: after a restore it starts empty and
    passes more bids, never fewer than it must.

    >>> from barrierflow.nexmark.events_file import record_batch_of
    >>> from barrierflow.nexmark.model import Bid
    >>> may_be_highest = MayBeHighest()
    >>> def prices(*bids):
    ...     events = record_batch_of([Bid(1, 2, p, "", "", t, "") for p, t in bids])
    ...     return may_be_highest(events).column("price").to_pylist()
    >>> prices((5, 1), (3, 2), (5, 3), (8, 10_001), (4, 10_000))
    [5, 5, 8, 4]
    >>> prices((4, 4), (7, 5), (6, 10_002))
    [7]
    """

    WINDOWS_REMEMBERED = 4

    def __init__(self) -> None:
        self.highest: dict[int, int] = {}
        """Window start -> the highest price passed in that window."""

    def __call__(self, events: pa.RecordBatch) -> pa.RecordBatch:
        bids = bids_of(events)
        times = column(bids, "dateTime").to_numpy(zero_copy_only=False)
        prices = column(bids, "price").to_numpy(zero_copy_only=False)
        offsets = np.mod(times, SIZE)
        inside = offsets != 0
        starts = times - offsets
        windows, window_of = np.unique(starts[inside], return_inverse=True)
        highest = np.full(len(windows), np.iinfo(np.int64).min, np.int64)
        np.maximum.at(highest, window_of, prices[inside])
        remembered = self.highest
        for n, (start, price) in enumerate(zip(windows.tolist(), highest.tolist(), strict=True)):
            before = remembered.get(start)
            if before is not None and before > price:
                highest[n] = price = before
            remembered[start] = price
        while len(remembered) > self.WINDOWS_REMEMBERED:
            del remembered[min(remembered)]
        keep = ~inside
        keep[inside] = prices[inside] >= highest[window_of]
        kept = bids.filter(pa.array(keep))
        return rows(kept, {name: column(kept, name) for name in COLUMNS})


class HighestBids(AggregateFunction):
    """Keeps the highest bids of a window, the bids at whole multiples of SIZE set aside."""

    def create_accumulator(self) -> Candidates:
        return Candidates()

    def add(self, value: BidRow, accumulator: Candidates) -> Candidates:
        if value["dateTime"] % SIZE:
            accumulator.highest.add(value)
        else:
            accumulator.edges.append(value)
        return accumulator

    def get_result(self, accumulator: Candidates) -> Candidates:
        return accumulator

    def merge(self, acc_a: Candidates, acc_b: Candidates) -> Candidates:
        acc_a.highest.merge(acc_b.highest)
        acc_a.edges.extend(acc_b.edges)
        return acc_a


class AuctionHighest(ProcessWindowFunction):
    """Sorts out the edge bids: at the window's start they count, at its end they only match.

    The window spans [start, start + SIZE + 1): the tumbling window and its end instant.
    """

    def process(self, auction: int, context: Any, results: Any) -> Any:
        start = context.window().start
        for candidates in results:
            highest = Highest(candidates.highest.price, list(candidates.highest.bids))
            at_end = []
            for bid in candidates.edges:
                if bid["dateTime"] == start:
                    highest.add(bid)
                else:
                    at_end.append(bid)
            at_end = [bid for bid in at_end if bid["price"] >= highest.price]
            yield WindowPart(start + SIZE, highest, at_end)


class WindowHighest(KeyedProcessFunction):
    """Merges the auctions' parts of one window (the key is its end); once the watermark
    reaches the end, emits the bids at the window's highest price, those at the end too."""

    def open(self, runtime_context: Any) -> None:
        self.merged = runtime_context.get_state(ValueStateDescriptor("merged"))

    def process_element(self, value: WindowPart, ctx: Any) -> None:
        merged = self.merged.value()
        if merged is None:
            merged = WindowPart(value.window_end, Highest(), [])
            ctx.timer_service().register_event_time_timer(value.window_end)
        merged.highest.merge(value.highest)
        merged.at_end.extend(value.at_end)
        self.merged.update(merged)

    def on_timer(self, timestamp: int, ctx: Any) -> Any:
        merged = self.merged.value()
        self.merged.clear()
        price = merged.highest.price
        for bid in merged.highest.bids:
            yield bid_row(bid)
        for bid in merged.at_end:
            if bid["price"] == price:
                yield bid_row(bid)


def bid_row(bid: BidRow) -> dict[str, Any]:
    return {name: bid[name] for name in COLUMNS}


def window_end_of(part: WindowPart) -> int:
    return part.window_end


def build(events: DataStream) -> DataStream:
    parts = (
        events.map_batches(MayBeHighest())
        .name("q7-may-be-highest")
        .key_by("auction")
        .window(SlidingEventTimeWindows.of(SIZE + 1, SIZE))
        .aggregate(HighestBids(), AuctionHighest())
        .uid("q7-highest-per-auction")
    )
    return parts.key_by(window_end_of).process(WindowHighest()).uid("q7-highest")
