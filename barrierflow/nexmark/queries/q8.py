"""Q8 (monitor new users): people who registered and opened an auction in one 10 s window.

Rows are (id, name, window start). flink-nexmark groups the persons by (id, name) and the
auctions by seller in each tumbling window and joins the two on id = seller and the
window. Built as one stream of both kinds (`person_or_seller`: a `NewPerson` or a
`Seller`, so the events are not forked in two), keyed by person id, in tumbling
event-time windows: `NewSellers` keeps each window's distinct persons and whether they
sold, `WithWindowStart` writes the persons of the windows in which they sold.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.nexmark.model import Auction, Person
from barrierflow.window import TumblingEventTimeWindows

__all__ = ["COLUMNS", "UPDATING", "NewPerson", "NewSellers", "Seller", "build"]

COLUMNS = ("id", "name", "stime")
UPDATING = False

WINDOW = Duration.of_seconds(10)


class NewPerson(NamedTuple):
    """A person who registered."""

    id: int
    name: str


class Seller(NamedTuple):
    """The seller of an auction that opened."""

    id: int


def person_or_seller(event: Any) -> list[NewPerson | Seller]:
    kind = type(event)
    if kind is Person:
        return [NewPerson(event.id, event.name)]
    if kind is Auction:
        return [Seller(event.seller)]
    return []


def person_id(value: NewPerson | Seller) -> int:
    return value.id


class NewSellers(AggregateFunction):
    """A person id's window: its distinct (id, name)s, if it also sold in it.

    >>> new_sellers = NewSellers()
    >>> accumulator = new_sellers.create_accumulator()
    >>> for value in [NewPerson(7, "Ann"), Seller(7), NewPerson(7, "Ann"), Seller(7)]:
    ...     accumulator = new_sellers.add(value, accumulator)
    >>> new_sellers.get_result(accumulator)
    [NewPerson(id=7, name='Ann')]
    """

    def create_accumulator(self) -> list[Any]:
        return [False, {}]  # sold, the persons (a dict as an ordered set)

    def add(self, value: NewPerson | Seller, accumulator: list[Any]) -> list[Any]:
        if type(value) is Seller:
            accumulator[0] = True
        else:
            accumulator[1][value] = None
        return accumulator

    def get_result(self, accumulator: list[Any]) -> list[NewPerson]:
        return list(accumulator[1]) if accumulator[0] else []

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        return [acc_a[0] or acc_b[0], {**acc_a[1], **acc_b[1]}]


class WithWindowStart(ProcessWindowFunction):
    """One row per new seller, with the start of the window."""

    def process(self, key: int, context: Any, results: Any) -> Any:
        start = context.window().start
        for persons in results:
            for person in persons:
                yield {"id": person.id, "name": person.name, "stime": start}


def build(events: DataStream) -> DataStream:
    return (
        events.flat_map(person_or_seller)
        .key_by(person_id)
        .window(TumblingEventTimeWindows.of(WINDOW))
        .aggregate(NewSellers(), WithWindowStart())
        .uid("q8-new-sellers")
    )
