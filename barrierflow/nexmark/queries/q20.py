"""Q20 (expand bid with auction): every bid on an auction of category 10, with the auction.

flink-nexmark's q20 joins bids with their auction (`B.auction = A.id`) where the
auction's category is 10. An inner join of two streams that only grow emits only
inserts, so the result is append-only.

Built as auctions and bids keyed by auction id meeting in `BidWithAuction`. Auction
ids are unique (the generator numbers auctions), so once an auction is known a bid
joins it at once and needs no state: the state is one entry per auction (the auction
if it is of category 10, else False) plus the bids that came before their auction.
Flink's regular join, which cannot assume the ids unique, keeps every bid.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.functions import KeyedCoProcessFunction
from barrierflow.nexmark.model import Auction, Bid
from barrierflow.state import ListStateDescriptor, ValueStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = (
    "auction", "bidder", "price", "channel", "url", "bid_dateTime", "bid_extra",
    "itemName", "description", "initialBid", "reserve", "auction_dateTime", "expires",
    "seller", "category", "auction_extra",
)  # fmt: skip
UPDATING = False

CATEGORY = 10


def is_auction(event: Any) -> bool:
    return type(event) is Auction


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def auction_id(auction: Auction) -> int:
    return auction.id


def bid_auction(bid: Bid) -> int:
    return bid.auction


def joined_row(bid: Bid, auction: Auction) -> dict[str, Any]:
    return dict(zip(COLUMNS, (*bid, *auction[1:]), strict=True))


class BidWithAuction(KeyedCoProcessFunction):
    """Auctions (first input) and bids (second), keyed by auction id: bids of category 10."""

    def open(self, runtime_context: Any) -> None:
        self.auction = runtime_context.get_state(ValueStateDescriptor("auction"))
        self.early_bids = runtime_context.get_list_state(ListStateDescriptor("early-bids"))

    def process_element1(self, auction: Auction, ctx: Any) -> list[dict] | None:
        wanted = auction.category == CATEGORY
        self.auction.update(auction if wanted else False)
        early = self.early_bids.get()
        if not early:
            return None
        self.early_bids.clear()
        return [joined_row(bid, auction) for bid in early] if wanted else None

    def process_element2(self, bid: Bid, ctx: Any) -> list[dict] | None:
        auction = self.auction.value()
        if auction is None:
            self.early_bids.add(bid)
            return None
        return [joined_row(bid, auction)] if auction else None


def build(events: DataStream) -> DataStream:
    auctions = events.filter(is_auction)
    bids = events.filter(is_bid)
    return (
        auctions.connect(bids)
        .key_by(auction_id, bid_auction)
        .process(BidWithAuction())
        .uid("q20-join")
    )
