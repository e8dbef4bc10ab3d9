"""Q7 (highest bid): the bids at each 10 s window's highest price, its end instant included.

flink-nexmark joins every bid with each window's highest price on `price = maxprice AND
dateTime BETWEEN window_end - 10 s AND window_end`, both ends inclusive: a bid at a whole
multiple of 10 s is the first instant of one window (where it counts towards the highest)
and the last of the window before (where it only matches). Built in two steps, after
`MayBeHighest` drops in each subtask the bids below one it already passed in their window:

1. bids keyed by auction, in sliding event-time windows of 10 s + 1 ms every 10 s, so each
   window also sees the bids at its end; `HighestBids` keeps the highest bids and sets
   aside those at whole multiples of 10 s, which `AuctionHighest` sorts out once it knows
   the window (start: they count; end: they only match);
2. those parts keyed by window end; `WindowHighest` merges them and, once the watermark
   reaches the window's end, emits the bids at the highest price.

Columns: flink-nexmark's INSERT lists `B.price, B.bidder` where its sink table has
`bidder, price`, so that sink's `bidder` column receives the price; here each column holds
what it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from barrierflow import DataStream
from barrierflow.functions import (
    AggregateFunction,
    FilterFunction,
    KeyedProcessFunction,
    ProcessWindowFunction,
)
from barrierflow.nexmark.model import Bid
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


@dataclass(slots=True)
class Highest:
    """The highest price of some bids and the bids at that price (-1: no bid yet).

    >>> highest = Highest()
    >>> for price in (5, 7, 3, 7):
    ...     highest.add(Bid(1, 2, price, "", "", 0, ""))
    >>> highest.price, len(highest.bids)
    (7, 2)
    """

    price: int = -1
    bids: list[Bid] = field(default_factory=list)

    def add(self, bid: Bid) -> None:
        if bid.price > self.price:
            self.price = bid.price
            self.bids = [bid]
        elif bid.price == self.price:
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
    edges: list[Bid] = field(default_factory=list)
    """Bids at a whole multiple of SIZE: the window's first or its last instant."""


@dataclass(slots=True)
class WindowPart:
    """One auction's share of the window ending at `window_end`."""

    window_end: int
    highest: Highest
    at_end: list[Bid]
    """Bids at `window_end` itself, as high as `highest` (they match, but do not count)."""


class MayBeHighest(FilterFunction):
    """Passes a bid unless this subtask already passed a higher one in its window (then it
    cannot be at the window's highest price); bids at whole multiples of SIZE always pass.

    What it remembers is an optimization, not state: after a restore it starts empty and
    passes more bids, never fewer than it must.

    >>> may_be_highest = MayBeHighest()
    >>> [may_be_highest.filter(Bid(1, 2, price, "", "", 1, "")) for price in (5, 3, 5, 8, 7)]
    [True, False, True, True, False]
    """

    WINDOWS_REMEMBERED = 4

    def __init__(self) -> None:
        self.highest: dict[int, int] = {}
        """Window start -> the highest price passed in that window."""

    def filter(self, value: Bid) -> bool:
        offset = value.date_time % SIZE
        if not offset:
            return True
        start = value.date_time - offset
        highest = self.highest.get(start)
        if highest is not None and value.price < highest:
            return False
        if highest is None and len(self.highest) >= self.WINDOWS_REMEMBERED:
            del self.highest[min(self.highest)]
        self.highest[start] = value.price
        return True


class HighestBids(AggregateFunction):
    """Keeps the highest bids of a window, the bids at whole multiples of SIZE set aside."""

    def create_accumulator(self) -> Candidates:
        return Candidates()

    def add(self, value: Bid, accumulator: Candidates) -> Candidates:
        if value.date_time % SIZE:
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
                if bid.date_time == start:
                    highest.add(bid)
                else:
                    at_end.append(bid)
            at_end = [bid for bid in at_end if bid.price >= highest.price]
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
            if bid.price == price:
                yield bid_row(bid)


def bid_row(bid: Bid) -> dict[str, Any]:
    return {
        "auction": bid.auction,
        "bidder": bid.bidder,
        "price": bid.price,
        "dateTime": bid.date_time,
        "extra": bid.extra,
    }


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def auction_of(bid: Bid) -> int:
    return bid.auction


def window_end_of(part: WindowPart) -> int:
    return part.window_end


def build(events: DataStream) -> DataStream:
    parts = (
        events.filter(is_bid)
        .filter(MayBeHighest())
        .key_by(auction_of)
        .window(SlidingEventTimeWindows.of(SIZE + 1, SIZE))
        .aggregate(HighestBids(), AuctionHighest())
        .uid("q7-highest-per-auction")
    )
    return parts.key_by(window_end_of).process(WindowHighest()).uid("q7-highest")
