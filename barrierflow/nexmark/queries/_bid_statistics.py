"""What q15, q16 and q17 compute over bids: price ranks, days and minutes, Flink's AVG,
and q15's and q16's aggregate of bids, distinct bidders and distinct auctions.

Prices fall in three ranks (below 10 000, below 1 000 000, the rest), as the queries'
FILTER clauses cut them. Days and minutes are formatted in UTC, as Flink's
`DATE_FORMAT(dateTime, 'yyyy-MM-dd')` and `'HH:mm'` format an epoch-millisecond time.

>>> day_of(0), minute_of(90_061_000)
('1970-01-01', '01:01')
>>> price_rank(9_999), price_rank(10_000), price_rank(1_000_000)
(1, 2, 3)
>>> flink_avg(7, 2), flink_avg(-7, 2)
(3, -3)
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from barrierflow.nexmark.model import Bid
from barrierflow.nexmark.queries._changelog import MiniBatchAggregate
from barrierflow.state import MapState, MapStateDescriptor

__all__ = ["BidStatisticsAggregate", "day_of", "flink_avg", "minute_of", "price_rank"]

_DAY_MS = 86_400_000
_MINUTE_MS = 60_000


def price_rank(price: int) -> int:
    """1 for a price below 10 000, 2 below 1 000 000, else 3."""
    return 1 if price < 10_000 else 2 if price < 1_000_000 else 3


@functools.lru_cache(maxsize=256)
def _day_of_number(day_number: int) -> str:
    return datetime.fromtimestamp(day_number * 86_400, UTC).strftime("%Y-%m-%d")


def day_of(epoch_ms: int) -> str:
    """The UTC day of `epoch_ms` as 'yyyy-MM-dd'."""
    return _day_of_number(epoch_ms // _DAY_MS)


def minute_of(epoch_ms: int) -> str:
    """The UTC time of day of `epoch_ms` as 'HH:mm'."""
    hours, minutes = divmod(epoch_ms // _MINUTE_MS % 1440, 60)
    return f"{hours:02d}:{minutes:02d}"


def flink_avg(total: int, count: int) -> int:
    """AVG over a BIGINT column as Flink computes it: a BIGINT, the quotient truncated
    toward zero (Java's long division). `count` must be positive."""
    quotient = abs(total) // count
    return quotient if total >= 0 else -quotient


class BidStatisticsAggregate(MiniBatchAggregate):
    """q15's and q16's group aggregate: counts of bids, distinct bidders and distinct
    auctions, in all and per price rank, and (q16) the latest bid time.

    As Flink SQL runs `COUNT(DISTINCT x) FILTER (...)`, each distinct column is a
    `MapState` of value -> bit mask of the filters (price ranks) it was seen under, so a
    key's accumulator is a short list of counts and a changelog checkpoint writes only
    the map entries that changed, not every distinct value the key has seen. The
    accumulator is `[bids, rank1..3 bids, bidders, rank1..3 bidders, auctions, rank1..3
    auctions, latest]`; `counts(accumulator)` gives the twelve counts in q15's column
    order. Bids only arrive, never leave, so the counts are exact.
    """

    def open(self, runtime_context: Any) -> None:
        super().open(runtime_context)
        self.bidders = runtime_context.get_map_state(MapStateDescriptor("bidders"))
        self.auctions = runtime_context.get_map_state(MapStateDescriptor("auctions"))

    def create_accumulator(self) -> list[int]:
        return [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, _NO_TIME]

    def add(self, accumulator: list[int], bid: Bid) -> None:
        rank = price_rank(bid.price)
        accumulator[0] += 1
        accumulator[rank] += 1
        _count_distinct(self.bidders, bid.bidder, rank, accumulator, 4)
        _count_distinct(self.auctions, bid.auction, rank, accumulator, 8)
        if bid.date_time > accumulator[12]:
            accumulator[12] = bid.date_time

    @staticmethod
    def counts(accumulator: list[int]) -> tuple[int, ...]:
        """The twelve counts, in q15's column order."""
        return tuple(accumulator[:12])

    @staticmethod
    def latest(accumulator: list[int]) -> int:
        """The largest bid time counted."""
        return accumulator[12]


_NO_TIME = -(2**63)
"""The latest bid time before the first bid."""


def _count_distinct(
    seen: MapState, value: int, rank: int, accumulator: list[int], offset: int
) -> None:
    """Count `value` at `accumulator[offset]` (in all) and `[offset + rank]` (its rank)
    if `seen` (value -> bit mask of the ranks it came with) did not have it yet."""
    mask = seen.get(value)
    bit = 1 << rank
    if mask is None:
        seen.put(value, bit)
        accumulator[offset] += 1
        accumulator[offset + rank] += 1
    elif not mask & bit:
        seen.put(value, mask | bit)
        accumulator[offset + rank] += 1
