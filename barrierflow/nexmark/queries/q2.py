"""Q2 (selection): the bids on auctions whose id is a multiple of 123, as (auction, price).

Built as two filters (bids, then the auction ids) and a map; nothing is kept.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("auction", "price")
UPDATING = False

AUCTION_DIVISOR = 123


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def on_selected_auction(bid: Bid) -> bool:
    # SQL's MOD keeps the dividend's sign, Python's % the divisor's: they agree on zero.
    return bid.auction % AUCTION_DIVISOR == 0


def auction_price_row(bid: Bid) -> dict[str, Any]:
    return {"auction": bid.auction, "price": bid.price}


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).filter(on_selected_auction).map(auction_price_row)
