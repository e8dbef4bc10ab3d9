"""Q1 (currency conversion): every bid with its price in euros, 0.908 times the dollar price.

Built as a filter (bids only) and a map. flink-nexmark's price is a DECIMAL(23, 3), the exact
`price * 0.908`; here it is a float, `price * 908 / 1000`, the double nearest that decimal
(both operands are exact integers and Python's division rounds correctly). While the decimal
has at most 15 digits (prices below 10^12; generated ones stay below 10^9),
`Decimal(row["price"]).quantize(Decimal("0.001"))` gives it back exactly.

>>> euro_bid_row(Bid(7, 8, 1_001, "Google", "https://www.nexmark.com/a", 0, ""))["price"]
908.908
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid

__all__ = ["COLUMNS", "UPDATING", "build", "euro_bid_row"]

COLUMNS = ("auction", "bidder", "price", "dateTime", "extra")
UPDATING = False


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def euro_bid_row(bid: Bid) -> dict[str, Any]:
    return {
        "auction": bid.auction,
        "bidder": bid.bidder,
        "price": bid.price * 908 / 1000,
        "dateTime": bid.date_time,
        "extra": bid.extra,
    }


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).map(euro_bid_row)
