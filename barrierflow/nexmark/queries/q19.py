"""Q19 (auction top-10 price): the 10 highest bids of each auction, with their row numbers.

flink-nexmark's q19 keeps the bids of each auction with row number 1 to 10 by
`price DESC`, and outputs the row number (`rank_number`). Equal prices are a real tie
the SQL leaves open; here the earlier bid, then the smaller (bidder, channel, url,
extra), ranks first, which makes the rows unique. The result updates: a new bid in the
top 10 shifts the ranks below it.

Built as bids keyed by auction into `TopBids`, a `MiniBatchAggregate` whose
accumulator is the auction's top 10, sorted; at the next watermark after a change it
emits the ranks whose row changed (`rank_changes`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._changelog import MiniBatchAggregate, rank_changes

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra", "rank_number")
UPDATING = True

TOP = 10


def bid_auction(bid: Bid) -> int:
    return bid.auction


class TopBids(MiniBatchAggregate):
    """An auction's 10 best bids, each as its sort key `(-price, dateTime, bidder, channel,
    url, extra)`, in ascending order."""

    columns = COLUMNS

    def create_accumulator(self) -> list[tuple]:
        return []

    def add(self, top: list[tuple], bid: Bid) -> None:
        if len(top) == TOP and -bid.price > top[-1][0]:
            return  # cheaper than any of the ten
        key = (-bid.price, bid.date_time, bid.bidder, bid.channel, bid.url, bid.extra)
        if len(top) < TOP:
            bisect.insort(top, key)
        elif key < top[-1]:
            bisect.insort(top, key)
            top.pop()

    def result(self, auction: int, top: list[tuple]) -> tuple[tuple, ...]:
        return tuple(
            (auction, bidder, -negated_price, channel, url, date_time, extra)
            for negated_price, date_time, bidder, channel, url, extra in top
        )

    def changelog(self, before: Sequence[tuple] | None, after: Sequence[tuple]) -> list[dict]:
        return rank_changes(COLUMNS, before or (), after)


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).key_by(bid_auction).process(TopBids()).uid("q19-top-bids")
