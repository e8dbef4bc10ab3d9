"""Q3 (local item suggestion): category-10 auctions by sellers in OR, ID or CA, with the seller.

flink-nexmark's q3 joins auctions of category 10 with their sellers living in OR, ID or
CA, and emits each seller's name, city and state with the auction id. An inner join
of two streams that only grow emits only inserts, so the result is append-only.

Built as a regular join: the auctions and persons that pass the filters, keyed by
seller and by id, meet in `SellerJoin`, which keeps both sides (auction ids and the
persons' three columns) and pairs each arrival with what the other side holds. One
keyed stream of both kinds rather than two connected streams: see `_auction_bids`.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.functions import KeyedProcessFunction
from barrierflow.nexmark.model import Auction, Person
from barrierflow.state import ListStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("name", "city", "state", "id")
UPDATING = False

STATES = frozenset({"OR", "ID", "CA"})


def is_local_seller_or_their_auction(event: Any) -> bool:
    """Category-10 auctions and persons in one of STATES: all the join needs."""
    if type(event) is Auction:
        return event.category == 10
    return type(event) is Person and event.state in STATES


def seller_id(event: Auction | Person) -> int:
    """The seller of an auction, the id of a person: the join key."""
    return event.seller if type(event) is Auction else event.id


def result_row(person: tuple[str, str, str], auction_id: int) -> dict[str, Any]:
    name, city, state = person
    return {"name": name, "city": city, "state": state, "id": auction_id}


class SellerJoin(KeyedProcessFunction):
    """Auctions and persons keyed by person id: their inner join."""

    def open(self, runtime_context: Any) -> None:
        self.auction_ids = runtime_context.get_list_state(ListStateDescriptor("auction-ids"))
        self.persons = runtime_context.get_list_state(ListStateDescriptor("persons"))

    def process_element(self, event: Auction | Person, ctx: Any) -> list[dict]:
        if type(event) is Auction:
            self.auction_ids.add(event.id)
            return [result_row(person, event.id) for person in self.persons.get()]
        columns = (event.name, event.city, event.state)
        self.persons.add(columns)
        return [result_row(columns, auction_id) for auction_id in self.auction_ids.get()]


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_local_seller_or_their_auction)
        .key_by(seller_id)
        .process(SellerJoin())
        .uid("q3-join")
    )
