"""Q2 (selection): the auction and price of every bid on an auction whose id is a multiple of 123.

Built as one vectorized step (`map_batches`) on the events' Arrow columns: a filter on the
bid's auction id, then a projection.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Bid
>>> events = record_batch_of([
...     Bid(246, 1001, 52, "Google", "https://www.nexmark.com/a", 7, ""),
...     Bid(247, 1001, 53, "Google", "https://www.nexmark.com/a", 8, ""),
... ])
>>> selected_bids(events).to_pylist()
[{'auction': 246, 'price': 52}]
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bid_field, bids_of, column, rows

__all__ = ["COLUMNS", "UPDATING", "build", "selected_bids"]

COLUMNS = ("auction", "price")
UPDATING = False

MODULUS = 123


def selected_bids(events: pa.RecordBatch) -> pa.RecordBatch:
    """The auction and price of the bids on auctions whose id is a multiple of 123."""
    bids = bids_of(events, pc.equal(pc.remainder(bid_field("auction"), MODULUS), 0))
    return rows(bids, {name: column(bids, name) for name in COLUMNS})


def build(events: DataStream) -> DataStream:
    return events.map_batches(selected_bids).name("q2")
