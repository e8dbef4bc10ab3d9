"""Q0 (pass through): every bid as it came; the cost of reading, parsing and writing events.

Built as a filter (bids only) and a map to flink-nexmark's columns; nothing is kept.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("auction", "bidder", "price", "dateTime", "extra")
UPDATING = False


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def bid_row(bid: Bid) -> dict[str, Any]:
    return {
        "auction": bid.auction,
        "bidder": bid.bidder,
        "price": bid.price,
        "dateTime": bid.date_time,
        "extra": bid.extra,
    }


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).map(bid_row)
