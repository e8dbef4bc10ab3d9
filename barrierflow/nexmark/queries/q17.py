"""Q17 (auction statistics): per auction and day, bids per price rank and price statistics.

flink-nexmark's q17 groups the bids by auction and UTC day and computes the number of
bids, in all and per price rank, and MIN, MAX, AVG and SUM of the price; AVG of a BIGINT
is a BIGINT, the quotient truncated (`flink_avg`). An unbounded group aggregate: the
result updates.

Built as bids keyed by (auction, day) into a `MiniBatchAggregate` over a list of seven
numbers; each row is emitted again at the next watermark after it changed.
"""

from __future__ import annotations

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._bid_statistics import day_of, flink_avg, price_rank
from barrierflow.nexmark.queries._changelog import MiniBatchAggregate

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = (
    "auction", "day",
    "total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
    "min_price", "max_price", "avg_price", "sum_price",
)  # fmt: skip
UPDATING = True


def auction_and_day(bid: Bid) -> tuple[int, str]:
    return bid.auction, day_of(bid.date_time)


class AuctionDayStatistics(MiniBatchAggregate):
    """One auction's bids of one day: `[count, rank1, rank2, rank3, min, max, sum]`."""

    columns = COLUMNS

    def create_accumulator(self) -> list[int]:
        return [0, 0, 0, 0, 2**63, -(2**63), 0]

    def add(self, accumulator: list[int], bid: Bid) -> None:
        price = bid.price
        accumulator[0] += 1
        accumulator[price_rank(price)] += 1
        if price < accumulator[4]:
            accumulator[4] = price
        if price > accumulator[5]:
            accumulator[5] = price
        accumulator[6] += price

    def result(self, key: tuple[int, str], accumulator: list[int]) -> tuple:
        count, rank1, rank2, rank3, low, high, total = accumulator
        auction, day = key
        avg = flink_avg(total, count)
        return (auction, day, count, rank1, rank2, rank3, low, high, avg, total)


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_bid)
        .key_by(auction_and_day)
        .process(AuctionDayStatistics())
        .uid("q17-statistics")
    )
