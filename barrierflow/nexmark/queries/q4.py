"""Q4 (average price for a category): the mean of each auction's highest bid, per category.

flink-nexmark's q4 joins each auction with its bids within its lifetime (`dateTime` to
`expires`, inclusive), takes each auction's highest price, and averages those per
category; AVG of a BIGINT is a BIGINT, the quotient truncated (`flink_avg`). Both
aggregates update: a higher bid raises its auction's maximum, which moves the average.

Built in two keyed steps: auctions and bids keyed by auction id meet in
`HighestBid` (a `BestBidPerAuction`), which emits a `MaxChange` each time an auction's
maximum rises; keyed by category, `CategoryAverage` (a `MiniBatchAggregate`) takes the
old maximum out of the sum and puts the new one in, and at the next watermark emits
`-U`/`+U` if the average changed.
"""

from __future__ import annotations

from typing import NamedTuple

from barrierflow import DataStream
from barrierflow.nexmark.model import Auction, Bid
from barrierflow.nexmark.queries._auction_bids import (
    BestBidPerAuction,
    auction_id,
    is_auction_or_bid,
)
from barrierflow.nexmark.queries._bid_statistics import flink_avg
from barrierflow.nexmark.queries._changelog import MiniBatchAggregate

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("id", "final")
UPDATING = True


class MaxChange(NamedTuple):
    """An auction's highest price went from `before` (None: it had none) to `after`."""

    category: int
    before: int | None
    after: int


def change_category(change: MaxChange) -> int:
    return change.category


class HighestBid(BestBidPerAuction):
    """Each auction's highest bid within its lifetime; emits a `MaxChange` when it rises."""

    def better(self, bid: Bid, best: Bid) -> bool:
        return bid.price > best.price

    def best_changed(self, auction: Auction, before: Bid | None, after: Bid) -> list[MaxChange]:
        return [MaxChange(auction.category, None if before is None else before.price, after.price)]


class CategoryAverage(MiniBatchAggregate):
    """The average of a category's auction maxima, from `[sum, count]`."""

    columns = COLUMNS

    def create_accumulator(self) -> list[int]:
        return [0, 0]

    def add(self, sum_count: list[int], change: MaxChange) -> None:
        sum_count[0] += change.after - (change.before or 0)
        sum_count[1] += change.before is None

    def result(self, category: int, sum_count: list[int]) -> tuple[int, int]:
        return category, flink_avg(*sum_count)


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_auction_or_bid)
        .key_by(auction_id)
        .process(HighestBid())
        .uid("q4-max")
        .key_by(change_category)
        .process(CategoryAverage())
        .uid("q4-average")
    )
