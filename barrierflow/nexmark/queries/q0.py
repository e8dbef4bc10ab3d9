"""Q0 (pass through): every bid as it came; the cost of reading, parsing and writing events.

Built as one vectorized step (`map_batches`) on the events' Arrow columns: keep the bids,
flatten the `bid` struct into flink-nexmark's columns. No Python object is made per event.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Bid, Person
>>> events = record_batch_of([
...     Person(1000, "Ann", "a@b.c", "1234", "Boise", "ID", 5, ""),
...     Bid(1000, 1001, 52, "Google", "https://www.nexmark.com/a", 7, "x"),
... ])
>>> bid_columns(events).to_pylist()
[{'auction': 1000, 'bidder': 1001, 'price': 52, 'dateTime': 7, 'extra': 'x'}]
"""

from __future__ import annotations

import pyarrow as pa

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bids_of, column, rows

__all__ = ["COLUMNS", "UPDATING", "bid_columns", "build"]

COLUMNS = ("auction", "bidder", "price", "dateTime", "extra")
UPDATING = False


def bid_columns(events: pa.RecordBatch) -> pa.RecordBatch:
    """The bids among `events`, in flink-nexmark's q0 columns."""
    bids = bids_of(events)
    return rows(bids, {name: column(bids, name) for name in COLUMNS})


def build(events: DataStream) -> DataStream:
    return events.map_batches(bid_columns).name("q0")
