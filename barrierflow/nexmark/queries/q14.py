"""Q14 (calculation): bids of 1M to 50M euros, with their time of day and their extra's 'c's.

Built as one vectorized step (`map_batches`, `calculated_bids`) on the events' Arrow
columns: keep the bids in the euro price range, then compute the columns. The euro price is
a float, `price * 908 / 1000`, the double nearest flink-nexmark's exact DECIMAL `0.908 *
price` (see q1); the range `1,000,000 < 0.908 * price < 50,000,000` is tested exactly on
the integer price (`price * 908` is never formed, so no price overflows). The hour of day
is UTC's, from integer arithmetic on the epoch milliseconds (a floor, as for times before
1970; no date library, so no time is out of range). `c_counts` is flink-nexmark's
CountChar UDF: the bytes of the UTF-8 `extra` equal to 'c' (no other character's UTF-8
holds that byte, so counting the character is exact), 0 for a missing `extra`.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Bid
>>> events = record_batch_of([
...     Bid(1, 2, 2_000_000, "", "", 8 * HOUR_MS, "cacao"),
...     Bid(1, 2, 3, "", "", 8 * HOUR_MS, ""),
... ])
>>> calculated_bids(events).to_pylist()  # doctest: +NORMALIZE_WHITESPACE
[{'auction': 1, 'bidder': 2, 'price': 1816000.0, 'bidTimeType': 'dayTime',
  'dateTime': 28800000, 'extra': 'cacao', 'c_counts': 2}]
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bids_of, column, rows
from barrierflow.nexmark.queries.q1 import euro_prices

__all__ = [
    "COLUMNS",
    "UPDATING",
    "bid_time_types",
    "build",
    "calculated_bids",
    "count_char",
    "in_price_range",
]

COLUMNS = ("auction", "bidder", "price", "bidTimeType", "dateTime", "extra", "c_counts")
UPDATING = False

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
MIN_THOUSANDTHS = 1_000_000 * 1000
"""The euro price must be above 1,000,000 euros: `price * 908` above this."""
MAX_THOUSANDTHS = 50_000_000 * 1000
"""... and below 50,000,000 euros: `price * 908` below this."""
LOWEST_PRICE = MIN_THOUSANDTHS // 908 + 1
"""The lowest integer price with `price * 908 > MIN_THOUSANDTHS`."""
HIGHEST_PRICE = (MAX_THOUSANDTHS - 1) // 908
"""The highest integer price with `price * 908 < MAX_THOUSANDTHS`."""

TIME_TYPES = pa.array(["dayTime", "nightTime", "otherTime"])


def in_price_range(prices: pa.Array) -> pa.Array:
    """Whether `1,000,000 < 0.908 * price < 50,000,000`, exactly (null for a null price).

    >>> in_price_range(pa.array([1_101_321, 1_101_322, 55_066_079, 55_066_080])).to_pylist()
    [False, True, True, False]
    """
    return pc.and_(pc.greater_equal(prices, LOWEST_PRICE), pc.less_equal(prices, HIGHEST_PRICE))


def bid_time_types(times: pa.Array) -> pa.Array:
    """'dayTime' from 8:00 to 18:59 UTC, 'nightTime' from 20:00 to 6:59, else 'otherTime'.

    >>> bid_time_types(pa.array([8 * HOUR_MS, 7 * HOUR_MS, -1])).to_pylist()
    ['dayTime', 'otherTime', 'nightTime']
    """
    millis = times.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    hours = np.mod(millis, DAY_MS) // HOUR_MS
    kinds = np.where((hours >= 8) & (hours <= 18), 0, np.where((hours <= 6) | (hours >= 20), 1, 2))
    return TIME_TYPES.take(pa.array(kinds))


def count_char(texts: pa.Array, char: str) -> pa.Array:
    """How often `char` occurs in each text (0 for a null): flink-nexmark's CountChar.

    >>> count_char(pa.array(["cacao", None, "çc"]), "c").to_pylist()
    [2, 0, 1]
    """
    return pc.count_substring(texts, char).fill_null(0).cast(pa.int64())


def calculated_bids(events: pa.RecordBatch) -> pa.RecordBatch:
    """The bids among `events` in the price range, in flink-nexmark's q14 columns."""
    bids = bids_of(events)
    bids = bids.filter(in_price_range(column(bids, "price")))
    extra = column(bids, "extra")
    date_time = column(bids, "dateTime")
    return rows(
        bids,
        {
            "auction": column(bids, "auction"),
            "bidder": column(bids, "bidder"),
            "price": euro_prices(column(bids, "price")),
            "bidTimeType": bid_time_types(date_time),
            "dateTime": date_time,
            "extra": extra,
            "c_counts": count_char(extra, "c"),
        },
    )


def build(events: DataStream) -> DataStream:
    return events.map_batches(calculated_bids).name("q14")
