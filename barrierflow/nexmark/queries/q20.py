"""Q20 (expand bid with auction): every bid on an auction of category 10, with the auction.

flink-nexmark's q20 joins bids with their auction (`B.auction = A.id`) where the
auction's category is 10. An inner join of two streams that only grow emits only
inserts, so the result is append-only.

Built as auctions and bids in one stream keyed by auction id (see `_auction_bids`)
into `BidWithAuction`. Auction ids are unique (the generator numbers auctions), so once
an auction is known a bid joins it at once and needs no state: the state is one entry
per auction (the auction if it is of category 10, else False) plus the bids that came
before their auction.
Flink's regular join, which cannot assume the ids unique, keeps every bid.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.functions import KeyedProcessFunction
from barrierflow.nexmark.model import Auction, Bid
from barrierflow.nexmark.queries._auction_bids import auction_id, is_auction_or_bid
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = (
    "auction", "bidder", "price", "channel", "url", "bid_dateTime", "bid_extra",
    "itemName", "description", "initialBid", "reserve", "auction_dateTime", "expires",
    "seller", "category", "auction_extra",
)  # fmt: skip
UPDATING = False

CATEGORY = 10


def joined_row(bid: Bid, auction: Auction) -> dict[str, Any]:
    return dict(zip(COLUMNS, (*bid, *auction[1:]), strict=True))


class BidWithAuction(KeyedProcessFunction):
    """Auctions and bids keyed by auction id: the bids of auctions of category 10."""

    def open(self, runtime_context: Any) -> None:
        self.auction = runtime_context.get_state(ValueStateDescriptor("auction"))
        self.early_bids = runtime_context.get_list_state(ListStateDescriptor("early-bids"))

    def process_element(self, event: Auction | Bid, ctx: Any) -> list[dict] | None:
        if type(event) is Bid:
            return self._on_bid(event)
        return self._on_auction(event)

    def _on_auction(self, auction: Auction) -> list[dict] | None:
        wanted = auction.category == CATEGORY
        self.auction.update(auction if wanted else False)
        early = self.early_bids.get()
        if not early:
            return None
        self.early_bids.clear()
        return [joined_row(bid, auction) for bid in early] if wanted else None

    def _on_bid(self, bid: Bid) -> list[dict] | None:
        auction = self.auction.value()
        if auction is None:
            self.early_bids.add(bid)
            return None
        return [joined_row(bid, auction)] if auction else None


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_auction_or_bid)
        .key_by(auction_id)
        .process(BidWithAuction())
        .uid("q20-join")
    )
