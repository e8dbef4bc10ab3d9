"""The join of q4 and q9: each auction with its best bid among those within its lifetime.

Both queries join `auction A, bid B WHERE A.id = B.auction AND B.dateTime BETWEEN
A.dateTime AND A.expires` and keep one bid per auction: q4 the highest price, q9 the
winner (highest price, then earliest). `BestBidPerAuction` is that join and fold over
one stream of auctions and bids keyed by auction id (`is_auction_or_bid`,
`auction_id`); a subclass says which bid is better and what a new best emits.

One keyed stream rather than two connected ones: a stream split by two filters feeds two
operators that cannot share its chain, so each would cost a task per subtask, and every
event a hop; filtered once, the events stay in the source's chain up to the shuffle.

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

from barrierflow.functions import KeyedProcessFunction
from barrierflow.nexmark.model import Auction, Bid
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor

__all__ = ["BestBidPerAuction", "auction_id", "is_auction_or_bid"]


def is_auction_or_bid(event: Any) -> bool:
    return type(event) is Auction or type(event) is Bid


def auction_id(event: Auction | Bid) -> int:
    """The id of an auction, the auction of a bid."""
    return event.auction if type(event) is Bid else event.id


class BestBidPerAuction(KeyedProcessFunction):
    """Keeps each auction's best bid within [dateTime, expires] and reports when it changes.

    Takes auctions and bids keyed by auction id (`auction_id`).
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

    def process_element(self, event: Auction | Bid, ctx: Any) -> Iterable[Any] | None:
        if type(event) is Bid:
            return self._on_bid(event, ctx)
        return self._on_auction(event, ctx)

    def _on_auction(self, auction: Auction, ctx: Any) -> Iterable[Any] | None:
        self.auction.update(auction)
        ctx.timer_service().register_event_time_timer(auction.expires)
        early = self.early_bids.get()
        if not early:
            return None
        self.early_bids.clear()
        return self._fold(auction, early)

    def _on_bid(self, bid: Bid, ctx: Any) -> Iterable[Any] | None:
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
