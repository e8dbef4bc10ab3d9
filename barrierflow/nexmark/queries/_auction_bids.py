"""The join of q4 and q9: each auction with its best bid among those within its lifetime.

Both queries join `auction A, bid B WHERE A.id = B.auction AND B.dateTime BETWEEN
A.dateTime AND A.expires` and keep one bid per auction: q4 the highest price, q9 the
winner (highest price, then earliest). `BestBidPerAuction` is that join and fold for
auctions (first input) and bids (second input) keyed by auction id; a subclass says
which bid is better and what a new best emits.

State stays bounded, and the result exact, because no event is late (each is newer
than the watermark when it arrives, as the events' 4 s bound guarantees):

- once the watermark reaches an auction's `expires`, no bid within its lifetime can
  still come, so its state is dropped (its best bid is final);
- a bid that comes before its auction waits for it; once the watermark reaches the
  bid's time, an auction still to come starts after the bid, so the bid is dropped.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from typing import Any

from barrierflow.functions import KeyedCoProcessFunction
from barrierflow.nexmark.model import Auction, Bid
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor

__all__ = ["BestBidPerAuction"]


class BestBidPerAuction(KeyedCoProcessFunction):
    """Keeps each auction's best bid within [dateTime, expires] and reports when it changes.

    Keyed by auction id; `process_element1` takes auctions, `process_element2` bids.
    State per auction: the auction, its best bid so far, and the bids that came before
    it; all of it is dropped when the watermark passes `expires`.
    """

    def open(self, runtime_context: Any) -> None:
        self.auction = runtime_context.get_state(ValueStateDescriptor("auction"))
        self.best = runtime_context.get_state(ValueStateDescriptor("best-bid"))
        self.early_bids = runtime_context.get_list_state(ListStateDescriptor("early-bids"))

    @abstractmethod
    def better(self, bid: Bid, best: Bid) -> bool:
        """Whether `bid` takes the place of `best`."""

    @abstractmethod
    def best_changed(self, auction: Auction, before: Bid | None, after: Bid) -> Iterable[Any]:
        """What to emit when the auction's best bid becomes `after` (`before`: None at first)."""

    def process_element1(self, auction: Auction, ctx: Any) -> Iterable[Any] | None:
        self.auction.update(auction)
        ctx.timer_service().register_event_time_timer(auction.expires)
        early = self.early_bids.get()
        if not early:
            return None
        self.early_bids.clear()
        return self._fold(auction, early)

    def process_element2(self, bid: Bid, ctx: Any) -> Iterable[Any] | None:
        auction = self.auction.value()
        if auction is not None:
            return self._fold(auction, (bid,))
        timers = ctx.timer_service()
        if bid.date_time > timers.current_watermark():
            self.early_bids.add(bid)
            timers.register_event_time_timer(bid.date_time)
        return None

    def on_timer(self, timestamp: int, ctx: Any) -> None:
        auction = self.auction.value()
        if auction is None:
            watermark = ctx.timer_service().current_watermark()
            self.early_bids.update([b for b in self.early_bids.get() if b.date_time > watermark])
        elif timestamp >= auction.expires:
            self.auction.clear()
            self.best.clear()

    def _fold(self, auction: Auction, bids: Iterable[Bid]) -> Iterable[Any] | None:
        start, end = auction.date_time, auction.expires
        before = best = self.best.value()
        for bid in bids:
            if start <= bid.date_time <= end and (best is None or self.better(bid, best)):
                best = bid
        if best is before:
            return None
        self.best.update(best)
        return self.best_changed(auction, before, best)
