"""Bids as Arrow columns: what the columnar queries (q0, q1, q2) share.

The events reach `DataStream.map_batches` as Arrow record batches in flink-nexmark's table
shape, with their event time in the `_timestamp` column; a query keeps that column in
its output so its rows keep their event time.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow.nexmark.model import BID

EVENT_TIME = "_timestamp"
"""The column `map_batches` carries each row's event time in."""


def bids_of(events: pa.RecordBatch, *keep: pc.Expression) -> pa.RecordBatch:
    """The bids among `events` that pass every `keep` filter on the `bid` struct."""
    condition = pc.field("event_type") == BID
    for expression in keep:
        condition = condition & expression
    return events.filter(condition)


def bid_field(name: str) -> pc.Expression:
    """A field of the `bid` struct, for filters (`pc.equal(bid_field("price"), 0)`)."""
    return pc.field("bid", name)


def rows(bids: pa.RecordBatch, columns: dict[str, pa.Array]) -> pa.RecordBatch:
    """The output columns, in order, with the bids' event time kept."""
    names = list(columns)
    arrays = list(columns.values())
    if EVENT_TIME in bids.schema.names:
        names.append(EVENT_TIME)
        arrays.append(bids.column(EVENT_TIME))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def column(bids: pa.RecordBatch, name: str) -> pa.Array:
    """One field of the bids' `bid` struct, as a flat column."""
    return pc.struct_field(bids.column("bid"), name)
