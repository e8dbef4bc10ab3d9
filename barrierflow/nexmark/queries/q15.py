"""Q15 (bidding statistics): per day, bids, distinct bidders and auctions, per price rank.

flink-nexmark's q15 groups the bids by their UTC day ('yyyy-MM-dd') and counts bids,
distinct bidders and distinct auctions, each in all and filtered by price rank (below
10 000, below 1 000 000, the rest). An unbounded group aggregate: the result updates.

Built as bids keyed by day into a `MiniBatchAggregate` whose accumulator is a
`BidStatistics`; each day's row is emitted again (`-U`/`+U`) at the next watermark after
it changed.
"""

from __future__ import annotations

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._bid_statistics import BidStatistics, day_of
from barrierflow.nexmark.queries._changelog import MiniBatchAggregate

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = (
    "day",
    "total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
    "total_bidders", "rank1_bidders", "rank2_bidders", "rank3_bidders",
    "total_auctions", "rank1_auctions", "rank2_auctions", "rank3_auctions",
)  # fmt: skip
UPDATING = True


def bid_day(bid: Bid) -> str:
    return day_of(bid.date_time)


class DailyStatistics(MiniBatchAggregate):
    """One day's `BidStatistics`."""

    columns = COLUMNS

    def create_accumulator(self) -> BidStatistics:
        return BidStatistics()

    def add(self, accumulator: BidStatistics, bid: Bid) -> None:
        accumulator.add(bid.bidder, bid.auction, bid.price, bid.date_time)

    def result(self, day: str, accumulator: BidStatistics) -> tuple:
        return (day, *accumulator.counts())


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).key_by(bid_day).process(DailyStatistics()).uid("q15-statistics")
