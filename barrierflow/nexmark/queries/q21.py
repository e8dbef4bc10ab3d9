"""Q21 (add channel id): bids with their channel's id, fixed or from their URL, if they have one.

A hot channel's id is fixed; any other channel's is the `channel_id` parameter of the
bid's URL; bids with neither are dropped.

Built as one vectorized step (`map_batches`, `with_channel_ids`) on the events' Arrow
columns. A channel is hot when its lower-case form (Python's `str.lower`, Java's
`toLowerCase`) is a hot channel's name: as the only character outside ASCII whose lower
case is ASCII is the Kelvin sign (to 'k'), that is ASCII lower-casing after the Kelvin
sign becomes 'k' (Arrow's `utf8_lower` would also turn 'İ' into 'i', which Python and Java
turn into 'i' and a combining dot). A missing channel is not hot (Flink's `LOWER(NULL)` is
NULL, so its CASE falls through to the URL). The URL parameter is flink-nexmark's
`REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)`: group 2 of the first match (Java's
`Matcher.find`, Python's `re.search`, RE2's leftmost match here, which agree on this
pattern), None when nothing matches; an empty value is a channel id of "" (not None), as
in Flink.

>>> channel_ids(
...     pa.array(["Google", "channel-7", "channel-7"]),
...     pa.array(["https://x/a?query=1", "https://x/a?query=1&channel_id=42", "https://x/a"]),
... ).to_pylist()
['1', '42', None]
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bids_of, column, rows

__all__ = [
    "COLUMNS",
    "UPDATING",
    "build",
    "channel_ids",
    "hot_channel_ids",
    "regexp_extract",
    "with_channel_ids",
]

COLUMNS = ("auction", "bidder", "price", "channel", "channel_id")
UPDATING = False

HOT_CHANNEL_IDS = {"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}
"""The channel ids of the hot channels, by lower-cased channel name."""
CHANNEL_ID_PARAMETER = r"(?P<start>&|^)channel_id=(?P<channel_id>[^&]*)"
"""flink-nexmark's `(&|^)channel_id=([^&]*)`, its groups named for Arrow."""
KELVIN_SIGN = "\u212a"
"""The one character outside ASCII whose lower case (Python's, Java's) is ASCII: 'k'."""

_HOT_NAMES = pa.array(list(HOT_CHANNEL_IDS))
_HOT_IDS = pa.array(list(HOT_CHANNEL_IDS.values()))


def regexp_extract(texts: pa.Array, pattern: str, group: str) -> pa.Array:
    """Flink's REGEXP_EXTRACT: the named `group` of the first match of `pattern` in each
    text, or null (no match, or a null text).

    >>> regexp_extract(pa.array(["a&channel_id=", "b", None]), CHANNEL_ID_PARAMETER,
    ...                "channel_id").to_pylist()
    ['', None, None]
    """
    return pc.struct_field(pc.extract_regex(texts, pattern), group)


def hot_channel_ids(channels: pa.Array) -> pa.Array:
    """The fixed id of each hot channel, null for the others (and for a null channel).

    >>> hot_channel_ids(pa.array(["Apple", "FACEBOO\\u212a", "BA\\u0130DU", None])).to_pylist()
    ['0', '2', None, None]
    """
    lowered = pc.ascii_lower(pc.replace_substring(channels, KELVIN_SIGN, "k"))
    return _HOT_IDS.take(pc.index_in(lowered, value_set=_HOT_NAMES))


def channel_ids(channels: pa.Array, urls: pa.Array) -> pa.Array:
    """Each bid's channel id: fixed for a hot channel, else its URL's channel_id (or null)."""
    return pc.coalesce(
        hot_channel_ids(channels), regexp_extract(urls, CHANNEL_ID_PARAMETER, "channel_id")
    )


def with_channel_ids(events: pa.RecordBatch) -> pa.RecordBatch:
    """The bids among `events` that have a channel id, in flink-nexmark's q21 columns."""
    bids = bids_of(events)
    found = channel_ids(column(bids, "channel"), column(bids, "url"))
    has_one = pc.is_valid(found)
    bids, found = bids.filter(has_one), found.filter(has_one)
    return rows(
        bids,
        {
            "auction": column(bids, "auction"),
            "bidder": column(bids, "bidder"),
            "price": column(bids, "price"),
            "channel": column(bids, "channel"),
            "channel_id": found,
        },
    )


def build(events: DataStream) -> DataStream:
    return events.map_batches(with_channel_ids).name("q21")
