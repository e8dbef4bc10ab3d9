"""Events as Arrow columns: what the columnar queries (q0-q2, q5, q7, q8, q11, q14, q21, q22)
share.

The events reach `DataStream.map_batches` as Arrow record batches in flink-nexmark's table
shape, with their event time in the `_timestamp` column; a query keeps that column in
its output so its rows keep their event time.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from barrierflow.nexmark.model import BID

EVENT_TIME = "_timestamp"
"""The column `map_batches` carries each row's event time in."""


def bids_of(events: pa.RecordBatch, *keep: pc.Expression) -> pa.RecordBatch:
    """The bids among `events` that pass every `keep` filter on the `bid` struct. Without
    one, a boolean mask: an expression filter goes through Acero's plan, slower on a
    batch."""
    if not keep:
        return events.filter(pc.equal(events.column("event_type"), BID))
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


# ---- event time and windows, for the pre-aggregating queries (q5, q7, q8, q11) ---------------


def with_event_times(events: pa.RecordBatch) -> pa.RecordBatch:
    """`events` with each one's `dateTime` in the `_timestamp` column, as `map_batches`
    hands the Nexmark events over (for examples and tests)."""
    from barrierflow.nexmark.events_file import event_times

    return events.append_column(EVENT_TIME, pa.array(event_times(events), pa.int64()))


def event_times_of(batch: pa.RecordBatch) -> np.ndarray:
    """The rows' event times (int64 epoch ms) from the `_timestamp` column; a batch without
    it is an error (the query needs event time: the events must carry timestamps)."""
    if EVENT_TIME not in batch.schema.names:
        raise ValueError(
            f"the batch has no {EVENT_TIME!r} column: this query needs each event's time "
            "(its events must carry timestamps)"
        )
    return batch.column(EVENT_TIME).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def window_starts(times: np.ndarray, size: int) -> np.ndarray:
    """The start of the tumbling window of `size` ms that holds each time, windows aligned
    to the epoch (a floor, as `TimeWindow.get_window_start_with_offset(t, 0, size)`).

    >>> window_starts(np.array([-1, 0, 1_999, 2_000]), 2_000).tolist()
    [-2000, 0, 0, 2000]
    """
    return times - np.mod(times, size)
