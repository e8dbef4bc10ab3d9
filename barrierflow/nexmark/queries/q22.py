"""Q22 (get URL directories): every bid with the first three directories of its URL.

Built as a filter (bids) and a map. A directory is flink-nexmark's `SPLIT_INDEX(url, '/', n)`
for n = 3, 4, 5: the n-th (0-based) piece of the URL split at every '/', empty pieces
kept, None when there are not that many pieces (or the URL is empty or None).

>>> url = "https://www.nexmark.com/abc/def/ghi/item.htm?query=1"
>>> [split_index(url, "/", n) for n in (3, 4, 5)]
['abc', 'def', 'ghi']
>>> split_index("https://a/b", "/", 5) is None
True
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid

__all__ = ["COLUMNS", "UPDATING", "build", "split_index", "url_directories"]

COLUMNS = ("auction", "bidder", "price", "channel", "dir1", "dir2", "dir3")
UPDATING = False


def split_index(text: str | None, separator: str, index: int) -> str | None:
    """Flink's SPLIT_INDEX: the `index`-th (0-based) piece of `text` split at `separator`,
    empty pieces kept; None if `index` is negative or out of range or `text` is empty."""
    if not text or index < 0:
        return None
    pieces = text.split(separator)
    return pieces[index] if index < len(pieces) else None


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def url_directories(url: str | None) -> tuple[str | None, str | None, str | None]:
    """`split_index(url, "/", n)` for n = 3, 4, 5, splitting the URL once."""
    pieces = url.split("/") if url else []
    count = len(pieces)
    return (
        pieces[3] if count > 3 else None,
        pieces[4] if count > 4 else None,
        pieces[5] if count > 5 else None,
    )


def with_directories(bid: Bid) -> dict[str, Any]:
    dirs = url_directories(bid.url)
    return {
        "auction": bid.auction,
        "bidder": bid.bidder,
        "price": bid.price,
        "channel": bid.channel,
        "dir1": dirs[0],
        "dir2": dirs[1],
        "dir3": dirs[2],
    }


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).map(with_directories)
