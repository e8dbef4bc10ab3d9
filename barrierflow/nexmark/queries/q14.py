"""Q14 (calculation): bids of 1M to 50M euros, with their time of day and their extra's 'c's.

Built as filters (bids, then the euro price range) and a map. The euro price is a float,
`price * 908 / 1000`, the double nearest flink-nexmark's exact DECIMAL `0.908 * price`
(see q1); the range is tested exactly, on `price * 908` in thousandths. The hour of day is
UTC's. `c_counts` is flink-nexmark's CountChar UDF: the bytes of the UTF-8 `extra` equal
to 'c' (no other character's UTF-8 holds that byte, so counting the character is exact).

>>> bid_time_type(Bid(1, 2, 3, "", "", 8 * HOUR_MS, "").date_time)
'dayTime'
>>> count_char("cacao", "c")
2
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid

__all__ = ["COLUMNS", "UPDATING", "bid_time_type", "build", "count_char"]

COLUMNS = ("auction", "bidder", "price", "bidTimeType", "dateTime", "extra", "c_counts")
UPDATING = False

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MIN_THOUSANDTHS = 1_000_000 * 1000
"""The euro price must be above 1,000,000 euros: `price * 908` above this."""
MAX_THOUSANDTHS = 50_000_000 * 1000
"""... and below 50,000,000 euros: `price * 908` below this."""


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def in_price_range(bid: Bid) -> bool:
    return MIN_THOUSANDTHS < bid.price * 908 < MAX_THOUSANDTHS


def bid_time_type(date_time: int) -> str:
    """'dayTime' from 8:00 to 18:59 UTC, 'nightTime' from 20:00 to 6:59, else 'otherTime'."""
    hour = date_time % DAY_MS // HOUR_MS
    if 8 <= hour <= 18:
        return "dayTime"
    if hour <= 6 or hour >= 20:
        return "nightTime"
    return "otherTime"


def count_char(text: str | None, char: str) -> int:
    """How often `char` occurs in `text` (0 for None): flink-nexmark's CountChar."""
    return 0 if text is None else text.count(char)


def calculated_row(bid: Bid) -> dict[str, Any]:
    return {
        "auction": bid.auction,
        "bidder": bid.bidder,
        "price": bid.price * 908 / 1000,
        "bidTimeType": bid_time_type(bid.date_time),
        "dateTime": bid.date_time,
        "extra": bid.extra,
        "c_counts": count_char(bid.extra, "c"),
    }


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).filter(in_price_range).map(calculated_row)
