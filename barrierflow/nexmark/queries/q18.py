"""Q18 (last bid): each bidder's latest bid on each auction.

flink-nexmark's q18 keeps row number 1 of the bids of each (bidder, auction) by
`dateTime DESC`, a deduplication keeping the last row. Equal times are a real tie the
SQL leaves open; here the greater (price, channel, url, extra) wins, which makes the
row unique. The result updates: a later bid replaces the pair's row (`-U`/`+U`).

Built as bids keyed by (bidder, auction) into `LatestBid`, which keeps the pair's
latest bid in keyed state.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.functions import KeyedProcessFunction
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._changelog import changes
from barrierflow.state import ValueStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra")
UPDATING = True


def bidder_and_auction(bid: Bid) -> tuple[int, int]:
    return bid.bidder, bid.auction


def recency(bid: Bid) -> tuple:
    """The order of a pair's bids: the greatest is the latest (ties broken by the rest)."""
    return (bid.date_time, bid.price, bid.channel, bid.url, bid.extra)


class LatestBid(KeyedProcessFunction):
    """A (bidder, auction) pair's latest bid; emits the pair's row when it changes."""

    def open(self, runtime_context: Any) -> None:
        self.latest = runtime_context.get_state(ValueStateDescriptor("latest-bid"))

    def process_element(self, bid: Bid, ctx: Any) -> list[dict] | None:
        latest = self.latest.value()
        if latest is not None and recency(bid) <= recency(latest):
            return None
        self.latest.update(bid)
        return changes(COLUMNS, latest, bid)


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).key_by(bidder_and_auction).process(LatestBid()).uid("q18-latest")
