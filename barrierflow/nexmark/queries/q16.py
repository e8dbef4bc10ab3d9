"""Q16 (channel statistics): q15's counts per channel and day, with the day's last minute.

flink-nexmark's q16 groups the bids by channel and UTC day and computes q15's counts
plus `max(DATE_FORMAT(dateTime, 'HH:mm'))`, the latest minute of the day with a bid on
that channel. An unbounded group aggregate: the result updates.

Built as bids keyed by (channel, day) into a `BidStatisticsAggregate` (distinct bidders
and auctions in map state), whose largest bid time gives the minute; each row is emitted
again at the next watermark after it changed.
"""

from __future__ import annotations

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._bid_statistics import BidStatisticsAggregate, day_of, minute_of

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = (
    "channel", "day", "minute",
    "total_bids", "rank1_bids", "rank2_bids", "rank3_bids",
    "total_bidders", "rank1_bidders", "rank2_bidders", "rank3_bidders",
    "total_auctions", "rank1_auctions", "rank2_auctions", "rank3_auctions",
)  # fmt: skip
UPDATING = True


def channel_and_day(bid: Bid) -> tuple[str, str]:
    return bid.channel, day_of(bid.date_time)


class ChannelDayStatistics(BidStatisticsAggregate):
    """One channel's statistics of one day."""

    columns = COLUMNS

    def result(self, key: tuple[str, str], accumulator: list[int]) -> tuple:
        channel, day = key
        return (channel, day, minute_of(self.latest(accumulator)), *self.counts(accumulator))


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_bid)
        .key_by(channel_and_day)
        .process(ChannelDayStatistics())
        .uid("q16-statistics")
    )
