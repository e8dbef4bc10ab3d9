"""Q21 (add channel id): bids with their channel's id, fixed or from their URL, if they have one.

A hot channel's id is fixed; any other channel's is the `channel_id` parameter of the
bid's URL; bids with neither are dropped.

Built as a filter (bids), a flat map (`with_channel_id`: zero or one row per bid). The URL
parameter is flink-nexmark's `REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`: group 2
of the first match (Java's `Matcher.find`, Python's `re.search`), None when nothing
matches; an empty value is a channel id of "" (not None), as in Flink.

>>> channel_id("Google", "https://www.nexmark.com/a/b/c/item.htm?query=1")
'1'
>>> channel_id("channel-7", "https://www.nexmark.com/a/b/c/item.htm?query=1&channel_id=42")
'42'
>>> channel_id("channel-7", "https://www.nexmark.com/a/b/c/item.htm?query=1") is None
True
"""

from __future__ import annotations

import re
from typing import Any

from barrierflow import DataStream
from barrierflow.nexmark.model import Bid

__all__ = ["COLUMNS", "UPDATING", "build", "channel_id", "regexp_extract"]

COLUMNS = ("auction", "bidder", "price", "channel", "channel_id")
UPDATING = False

HOT_CHANNEL_IDS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
"""The channel ids of the hot channels, by lower-cased channel name."""
CHANNEL_ID_PARAMETER = re.compile(r"(&|^)channel_id=([^&]*)")


def regexp_extract(text: str | None, pattern: re.Pattern[str], group: int) -> str | None:
    """Flink's REGEXP_EXTRACT: `group` of the first match of `pattern` in `text`, or None."""
    if text is None:
        return None
    match = pattern.search(text)
    return None if match is None else match.group(group)


def channel_id(channel: str, url: str | None) -> str | None:
    """The channel's id: fixed for a hot channel, else the URL's channel_id (None: none)."""
    hot = HOT_CHANNEL_IDS.get(channel.lower())
    return hot if hot is not None else regexp_extract(url, CHANNEL_ID_PARAMETER, 2)


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def with_channel_id(bid: Bid) -> list[dict[str, Any]]:
    found = channel_id(bid.channel, bid.url)
    if found is None:
        return []
    return [
        {
            "auction": bid.auction,
            "bidder": bid.bidder,
            "price": bid.price,
            "channel": bid.channel,
            "channel_id": found,
        }
    ]


def build(events: DataStream) -> DataStream:
    return events.filter(is_bid).flat_map(with_channel_id)
