"""Q8 (monitor new users): people who registered and opened an auction in one 10 s window.

Rows are (id, name, window start).

flink-nexmark groups the persons by (id, name) and the auctions by seller in each window and
joins the two on id = seller and the window. Built as a window co-group of the persons
(keyed by id) and the auctions' sellers (keyed by seller) in tumbling event-time windows:
`NewSellers` emits each distinct (id, name) of a window whose seller side is not empty.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from barrierflow import DataStream, Duration
from barrierflow.functions import CoGroupFunction
from barrierflow.nexmark.model import Auction, Person
from barrierflow.window import TumblingEventTimeWindows

__all__ = ["COLUMNS", "UPDATING", "NewSellers", "build"]

COLUMNS = ("id", "name", "stime")
UPDATING = False

WINDOW = Duration.of_seconds(10)
SIZE = 10_000
"""The window's size in ms (WINDOW)."""


class NewPerson(NamedTuple):
    """A person who registered, and the start of the window they registered in."""

    id: int
    name: str
    window_start: int


class NewSellers(CoGroupFunction):
    """One row per distinct person of a window in which they also sold.

    >>> rows = NewSellers().co_group([NewPerson(7, "Ann", 0), NewPerson(7, "Ann", 0)], [7, 7])
    >>> list(rows)
    [{'id': 7, 'name': 'Ann', 'stime': 0}]
    """

    def co_group(self, first: Any, second: Any) -> Any:
        if not any(True for _ in second):
            return
        for person in dict.fromkeys(first):
            yield {"id": person.id, "name": person.name, "stime": person.window_start}


def is_person(event: Any) -> bool:
    return type(event) is Person


def is_auction(event: Any) -> bool:
    return type(event) is Auction


def new_person(person: Person) -> NewPerson:
    return NewPerson(person.id, person.name, person.date_time - person.date_time % SIZE)


def seller_of(auction: Auction) -> int:
    return auction.seller


def person_id(person: NewPerson) -> int:
    return person.id


def seller_id(seller: int) -> int:
    return seller


def build(events: DataStream) -> DataStream:
    persons = events.filter(is_person).map(new_person)
    sellers = events.filter(is_auction).map(seller_of)
    return (
        persons.co_group(sellers)
        .where(person_id)
        .equal_to(seller_id)
        .window(TumblingEventTimeWindows.of(WINDOW))
        .apply(NewSellers())
        .uid("q8-join")
    )
