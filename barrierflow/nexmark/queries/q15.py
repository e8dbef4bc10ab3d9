"""Q15 (bidding statistics): per day, bids, distinct bidders and auctions, per price rank.

flink-nexmark's q15 groups the bids by their UTC day ('yyyy-MM-dd') and counts bids,
distinct bidders and distinct auctions, each in all and filtered by price rank (below
10 000, below 1 000 000, the rest). An unbounded group aggregate: the result updates.

Built as bids keyed by day into a `BidStatisticsAggregate` (distinct bidders and
auctions in map state); each day's row is emitted again (`-U`/`+U`) at the next
watermark after it changed.
"""

from __future__ import annotations

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._bid_statistics import BidStatisticsAggregate, day_of

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


class DailyStatistics(BidStatisticsAggregate):
    """One day's statistics."""

    columns = COLUMNS

    def result(self, day: str, accumulator: list[int]) -> tuple:
        return (day, *self.counts(accumulator))


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).key_by(bid_day).process(DailyStatistics()).uid("q15-statistics")
