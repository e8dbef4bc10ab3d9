"""What q15, q16 and q17 compute over bids: price ranks, days and minutes, Flink's AVG.

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

__all__ = ["BidStatistics", "day_of", "flink_avg", "minute_of", "price_rank"]

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


class BidStatistics:
    """Counts of bids, distinct bidders and distinct auctions: in all and per price rank.

    `counts()` gives them in q15's column order: total_bids, rank1..3_bids,
    total_bidders, rank1..3_bidders, total_auctions, rank1..3_auctions. `latest` is the
    largest bid time seen (q16's minute). Bids only arrive, never leave, so sets count
    the distinct values exactly.

    >>> stats = BidStatistics()
    >>> for bidder, auction, price in [(1, 10, 5), (1, 11, 50_000), (2, 10, 7)]:
    ...     stats.add(bidder, auction, price, 0)
    >>> stats.counts()
    (3, 2, 1, 0, 2, 2, 1, 0, 2, 1, 1, 0)
    """

    __slots__ = ("auctions", "bidders", "bids", "latest")

    def __init__(self) -> None:
        self.bids = [0, 0, 0, 0]
        """Index 0: every bid; 1 to 3: the bids of that price rank."""
        self.bidders: tuple[set[int], ...] = (set(), set(), set(), set())
        self.auctions: tuple[set[int], ...] = (set(), set(), set(), set())
        self.latest: int | None = None

    def add(self, bidder: int, auction: int, price: int, date_time: int) -> None:
        """Count one bid."""
        rank = price_rank(price)
        bids, bidders, auctions = self.bids, self.bidders, self.auctions
        bids[0] += 1
        bids[rank] += 1
        bidders[0].add(bidder)
        bidders[rank].add(bidder)
        auctions[0].add(auction)
        auctions[rank].add(auction)
        if self.latest is None or date_time > self.latest:
            self.latest = date_time

    def __deepcopy__(self, memo: dict[int, object]) -> BidStatistics:
        """A copy sharing no set or list with this one: what the heap backend hands out
        while a checkpoint holds this one (a C-level copy per set, not a pickle round trip
        of the whole object)."""
        copied = BidStatistics.__new__(BidStatistics)
        copied.bids = self.bids[:]
        copied.bidders = tuple(set(ids) for ids in self.bidders)
        copied.auctions = tuple(set(ids) for ids in self.auctions)
        copied.latest = self.latest
        return copied

    def counts(self) -> tuple[int, ...]:
        """The twelve counts, in q15's column order."""
        return (*self.bids, *map(len, self.bidders), *map(len, self.auctions))
