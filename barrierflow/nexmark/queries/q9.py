"""Q9 (winning bids): each auction with its best bid (highest, then earliest) in its lifetime.

flink-nexmark's q9 joins each auction with its bids within its lifetime (`dateTime` to
`expires`, inclusive) and keeps row number 1 by `price DESC, dateTime ASC`. Equal price
and time is a real tie the SQL leaves open; here the smaller bidder, then the smaller
`extra`, wins, which makes the row unique (those are all the bid columns of the
output). The result updates: a better bid replaces the auction's row (`-U`/`+U`).

Built as auctions and bids keyed by auction id meeting in `WinningBid`, a
`BestBidPerAuction`.
"""

from __future__ import annotations

from barrierflow import DataStream
from barrierflow.nexmark.model import Auction, Bid
from barrierflow.nexmark.queries._auction_bids import (
    BestBidPerAuction,
    auction_id,
    is_auction_or_bid,
)
from barrierflow.nexmark.queries._changelog import changes

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = (
    "id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires",
    "seller", "category", "extra",
    "auction", "bidder", "price", "bid_dateTime", "bid_extra",
)  # fmt: skip
UPDATING = True


def winning_row(auction: Auction, bid: Bid) -> tuple:
    return (*auction, bid.auction, bid.bidder, bid.price, bid.date_time, bid.extra)


class WinningBid(BestBidPerAuction):
    """Each auction's winning bid; emits the auction's row when the winner changes."""

    def better(self, bid: Bid, best: Bid) -> bool:
        if bid.price != best.price:
            return bid.price > best.price
        return (bid.date_time, bid.bidder, bid.extra) < (best.date_time, best.bidder, best.extra)

    def best_changed(self, auction: Auction, before: Bid | None, after: Bid) -> list[dict]:
        old = None if before is None else winning_row(auction, before)
        return changes(COLUMNS, old, winning_row(auction, after))


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_auction_or_bid)
        .key_by(auction_id)
        .process(WinningBid())
        .uid("q9-winning-bid")
    )
