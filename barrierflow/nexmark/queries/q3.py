"""Q3 (local item suggestion): category-10 auctions by sellers in OR, ID or CA, with the seller.

flink-nexmark's q3 joins auctions of category 10 with their sellers living in OR, ID or
CA, and emits each seller's name, city and state with the auction id. An inner join
of two streams that only grow emits only inserts, so the result is append-only.

Built as a regular join: the filtered auctions keyed by seller and the filtered
persons keyed by id meet in `SellerJoin`, which keeps both sides (auction ids and the
persons' three columns) and pairs each arrival with what the other side holds.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream
from barrierflow.functions import KeyedCoProcessFunction
from barrierflow.nexmark.model import Auction, Person
from barrierflow.state import ListStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("name", "city", "state", "id")
UPDATING = False

STATES = frozenset({"OR", "ID", "CA"})


def is_category_10_auction(event: Any) -> bool:
    return type(event) is Auction and event.category == 10


def is_local_person(event: Any) -> bool:
    return type(event) is Person and event.state in STATES


def seller(auction: Auction) -> int:
    return auction.seller


def person_id(person: Person) -> int:
    return person.id


def result_row(person: tuple[str, str, str], auction_id: int) -> dict[str, Any]:
    name, city, state = person
    return {"name": name, "city": city, "state": state, "id": auction_id}


class SellerJoin(KeyedCoProcessFunction):
    """Auctions (first input) and persons (second), keyed by person id: their inner join."""

    def open(self, runtime_context: Any) -> None:
        self.auction_ids = runtime_context.get_list_state(ListStateDescriptor("auction-ids"))
        self.persons = runtime_context.get_list_state(ListStateDescriptor("persons"))

    def process_element1(self, auction: Auction, ctx: Any) -> list[dict]:
        self.auction_ids.add(auction.id)
        return [result_row(person, auction.id) for person in self.persons.get()]

    def process_element2(self, person: Person, ctx: Any) -> list[dict]:
        columns = (person.name, person.city, person.state)
        self.persons.add(columns)
        return [result_row(columns, auction_id) for auction_id in self.auction_ids.get()]


def build(events: DataStream) -> DataStream:
    auctions = events.filter(is_category_10_auction)
    persons = events.filter(is_local_person)
    return auctions.connect(persons).key_by(seller, person_id).process(SellerJoin()).uid("q3-join")
