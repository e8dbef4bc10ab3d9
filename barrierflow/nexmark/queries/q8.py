"""Q8 (monitor new users): people who registered and opened an auction in one 10 s window.

Rows are (id, name, window start). flink-nexmark groups the persons by (id, name) and the
auctions by seller in each tumbling window and joins the two on id = seller and the
window. Built as one vectorized step and one windowed step:

1. `persons_and_sellers` (`map_batches`) drops the bids (46 of 50 events) with Arrow and
   makes one row per distinct (person id, name) registered and per distinct seller, per
   10 s window and batch (`sells` tells which), stamped with the earliest time among the
   events it stands for, so inside their window;
2. those rows keyed by person id, in tumbling event-time windows: `NewSellers` keeps each
   window's distinct persons and whether they sold, `WithWindowStart` writes the persons
   of the windows in which they sold.

Exact: the events a row stands for are all in its one tumbling window, which decides for
all of them (lateness is the window's), and the watermark does not move within a batch,
so a row does what its events would have done; the window keeps distinct values anyway.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Auction, Person
>>> from barrierflow.nexmark.queries._columns import with_event_times
>>> events = record_batch_of([
...     Person(7, "Ann", "", "", "", "", 12_000, ""),
...     Auction(1, "", "", 0, 0, 13_000, 20_000, 7, 10, ""),
...     Auction(2, "", "", 0, 0, 12_500, 20_000, 7, 10, ""),
... ])
>>> persons_and_sellers(with_event_times(events)).to_pylist()  # doctest: +NORMALIZE_WHITESPACE
[{'id': 7, 'name': 'Ann', 'sells': False, '_timestamp': 12000},
 {'id': 7, 'name': None, 'sells': True, '_timestamp': 12500}]
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.nexmark.model import AUCTION, PERSON
from barrierflow.nexmark.queries._columns import EVENT_TIME, event_times_of, window_starts
from barrierflow.window import TumblingEventTimeWindows

__all__ = [
    "COLUMNS",
    "UPDATING",
    "NewSellers",
    "WithWindowStart",
    "build",
    "persons_and_sellers",
]

COLUMNS = ("id", "name", "stime")
UPDATING = False

WINDOW = Duration.of_seconds(10)
WINDOW_MS = 10_000


def persons_and_sellers(events: pa.RecordBatch) -> pa.Table:
    """One row per distinct (id, name) of a registered person and per distinct seller of
    an auction, per 10 s window of `events`: columns id, name (None for a seller), sells
    and `_timestamp`, the earliest time among the events the row stands for."""
    kinds = events.column("event_type")
    persons = events.filter(pc.equal(kinds, PERSON))
    auctions = events.filter(pc.equal(kinds, AUCTION))
    person_times = event_times_of(persons)
    auction_times = event_times_of(auctions)
    person_rows = pa.table(
        {
            "id": pc.struct_field(persons.column("person"), "id"),
            "name": pc.struct_field(persons.column("person"), "name"),
            "sells": pa.repeat(False, persons.num_rows),
            "window": window_starts(person_times, WINDOW_MS),
            EVENT_TIME: person_times,
        }
    )
    seller_rows = pa.table(
        {
            "id": pc.struct_field(auctions.column("auction"), "seller"),
            "name": pa.nulls(auctions.num_rows, pa.string()),
            "sells": pa.repeat(True, auctions.num_rows),
            "window": window_starts(auction_times, WINDOW_MS),
            EVENT_TIME: auction_times,
        }
    )
    distinct = (
        pa.concat_tables([person_rows, seller_rows])
        .group_by(["id", "name", "sells", "window"], use_threads=False)
        .aggregate([(EVENT_TIME, "min")])
    )
    return pa.table(
        {
            "id": distinct.column("id"),
            "name": distinct.column("name"),
            "sells": distinct.column("sells"),
            EVENT_TIME: distinct.column(f"{EVENT_TIME}_min"),
        }
    )


class NewSellers(AggregateFunction):
    """A person id's window: its distinct names, if it also sold in it.

    >>> new_sellers = NewSellers()
    >>> accumulator = new_sellers.create_accumulator()
    >>> for row in [
    ...     {"id": 7, "name": "Ann", "sells": False},
    ...     {"id": 7, "name": None, "sells": True},
    ...     {"id": 7, "name": "Ann", "sells": False},
    ... ]:
    ...     accumulator = new_sellers.add(row, accumulator)
    >>> new_sellers.get_result(accumulator)
    ['Ann']
    """

    def create_accumulator(self) -> list[Any]:
        return [False, {}]  # sold, the names (a dict as an ordered set)

    def add(self, value: dict[str, Any], accumulator: list[Any]) -> list[Any]:
        if value["sells"]:
            accumulator[0] = True
        else:
            accumulator[1][value["name"]] = None
        return accumulator

    def get_result(self, accumulator: list[Any]) -> list[str | None]:
        return list(accumulator[1]) if accumulator[0] else []

    def merge(self, acc_a: list[Any], acc_b: list[Any]) -> list[Any]:
        return [acc_a[0] or acc_b[0], {**acc_a[1], **acc_b[1]}]


class WithWindowStart(ProcessWindowFunction):
    """One row per new seller (the key is the person id), with the start of the window."""

    def process(self, person_id: int, context: Any, results: Any) -> Any:
        start = context.window().start
        for names in results:
            for name in names:
                yield {"id": person_id, "name": name, "stime": start}


def build(events: DataStream) -> DataStream:
    return (
        events.map_batches(persons_and_sellers)
        .name("q8-persons-and-sellers")
        .key_by("id")
        .window(TumblingEventTimeWindows.of(WINDOW))
        .aggregate(NewSellers(), WithWindowStart())
        .uid("q8-new-sellers")
    )
