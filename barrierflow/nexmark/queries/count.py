"""Count (not a Nexmark query): bids per auction as a keyed running count, one row per bid.

The keyed count PyFlink's Python DataStream API is measured with (`key_by(auction).reduce`,
Python keyed state), for the benchmark's comparison. Built as a `map_batches` projection of
the bids' auction ids (with a 1 to add up), routed by the `auction` column without Python
objects, then a Python `reduce` per auction.

>>> add_counts({"auction": 7, "count": 2}, {"auction": 7, "count": 1})
{'auction': 7, 'count': 3}
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from barrierflow import DataStream
from barrierflow.nexmark.queries._columns import bids_of, column, rows

__all__ = ["COLUMNS", "UPDATING", "add_counts", "auction_ones", "build"]

COLUMNS = ("auction", "count")
UPDATING = False


def auction_ones(events: pa.RecordBatch) -> pa.RecordBatch:
    """Each bid's auction id with a count of 1."""
    bids = bids_of(events)
    auctions = column(bids, "auction")
    ones = pa.array([1] * len(auctions), type=pa.int64())
    return rows(bids, {"auction": auctions, "count": ones})


def add_counts(left: dict[str, Any], right: dict[str, Any]) -> dict[str, Any]:
    return {"auction": left["auction"], "count": left["count"] + right["count"]}


def build(events: DataStream) -> DataStream:
    return (
        events.map_batches(auction_ones)
        .name("auction ids")
        .key_by("auction")
        .reduce(add_counts)
        .uid("count-reduce")
    )
