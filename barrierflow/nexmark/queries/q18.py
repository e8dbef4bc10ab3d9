"""Q18 (last bid): each bidder's latest bid on each auction.

flink-nexmark's q18 keeps row number 1 of the bids of each (bidder, auction) by
`dateTime DESC`, a deduplication keeping the last row. Equal times are a real tie the
SQL leaves open; here the greater (price, channel, url, extra) wins, which makes the
row unique. The result updates: a later bid replaces the pair's row (`-U`/`+U`).

Built on the batch path: `pairs_of` (`map_batches`) flattens a batch's bids in Arrow and
gives each its (bidder, auction) pair as one string column `pair`; the bids are keyed by
it, and `LatestBids` (`process_batches`) reads the latest bid of all the batch's pairs
with one batched state read, goes through the batch's bids in order (emitting exactly
the changelog rows a bid-by-bid run emits, as one Arrow batch with the `op` column first)
and writes the pairs that changed with one batched write. `LatestBid` is the per-record
function it replaced (same rows), kept for the tests of the query's logic.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.functions import KeyedBatchFunction, KeyedProcessFunction
from barrierflow.nexmark.model import Bid
from barrierflow.nexmark.queries._changelog import INSERT, UPDATE_AFTER, UPDATE_BEFORE, changes
from barrierflow.nexmark.queries._columns import bids_of, column, rows
from barrierflow.state import ValueStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "LatestBid", "LatestBids", "build", "pairs_of"]

COLUMNS = ("auction", "bidder", "price", "channel", "url", "dateTime", "extra")
UPDATING = True
_TIME = COLUMNS.index("dateTime")


def bidder_and_auction(bid: Bid) -> tuple[int, int]:
    return bid.bidder, bid.auction


def recency(bid: Bid) -> tuple:
    """The order of a pair's bids: the greatest is the latest (ties broken by the rest)."""
    return (bid.date_time, bid.price, bid.channel, bid.url, bid.extra)


def _recency(row: tuple) -> tuple:
    """`recency` of a row in COLUMNS order."""
    return (row[5], row[2], row[3], row[4], row[6])


class LatestBid(KeyedProcessFunction):
    """A (bidder, auction) pair's latest bid; emits the pair's row when it changes."""

    def open(self, runtime_context: Any) -> None:
        self.latest = runtime_context.get_state(ValueStateDescriptor("latest-bid"))

    def process_element(self, bid: Bid, ctx: Any) -> list[dict] | None:
        latest = self.latest.value()
        if latest is not None and recency(bid) <= recency(latest):
            return None
        self.latest.update(bid)
        return changes(COLUMNS, latest, bid)


def pairs_of(events: pa.RecordBatch) -> pa.RecordBatch:
    """The `map_batches` step: the batch's bids as COLUMNS, and `pair`, the string
    "bidder/auction" (one column key for the pair; its key groups are one crc32 per
    distinct pair, vectorized)."""
    bids = bids_of(events)
    arrays = {name: column(bids, name) for name in COLUMNS}
    arrays["pair"] = pc.binary_join_element_wise(
        pc.cast(arrays["bidder"], pa.string()), pc.cast(arrays["auction"], pa.string()), "/"
    )
    return rows(bids, arrays)


class LatestBids(KeyedBatchFunction):
    """`LatestBid` a batch at a time (module docstring); state per pair: its latest bid
    as a tuple in COLUMNS order (ints and strings only: never copied for a snapshot)."""

    def open(self, runtime_context: Any) -> None:
        self.latest = runtime_context.get_batch_state(ValueStateDescriptor("latest-bid"))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> Any:
        if isinstance(batch, pa.RecordBatch):
            data = batch.select(list(COLUMNS))
        else:
            data = pa.RecordBatch.from_pylist(
                [{name: row[name] for name in COLUMNS} for row in batch]
            )
        bids = list(zip(*(column.to_pylist() for column in data.columns), strict=True))
        pairs = list(dict.fromkeys(keys))
        latest = dict(zip(pairs, self.latest.get_many(pairs), strict=True))
        at: dict[Any, int] = {}  # the index of a pair's latest bid when it is in this batch
        ops: list[str] = []
        sources: list[int] = []  # each output row's: a bid's index, or len(bids) + a replaced one's
        replaced: list[tuple] = []  # the rows -U takes back that came from the state
        for index, key in enumerate(keys):
            before = latest[key]
            bid = bids[index]
            if before is None:
                ops.append(INSERT)
                sources.append(index)
            elif bid[_TIME] < before[_TIME] or (
                bid[_TIME] == before[_TIME] and _recency(bid) <= _recency(before)
            ):
                continue  # dateTime first: most bids differ in it
            else:
                ops += (UPDATE_BEFORE, UPDATE_AFTER)
                earlier = at.get(key)
                if earlier is None:
                    earlier = len(bids) + len(replaced)
                    replaced.append(before)
                sources += (earlier, index)
            latest[key] = bid
            at[key] = index
        if not at:
            return None
        self.latest.put_many(list(at), [bids[index] for index in at.values()])
        if replaced:
            old = pa.RecordBatch.from_arrays(
                [
                    pa.array(values, type)
                    for values, type in zip(
                        zip(*replaced, strict=True), data.schema.types, strict=True
                    )
                ],
                schema=data.schema,
            )
            data = pa.Table.from_batches([data, old]).combine_chunks()
        out = data.take(pa.array(sources, pa.int64()))
        if isinstance(out, pa.Table):  # with replaced rows: one chunk, as combined above
            out = out.to_batches()[0]
        return out.add_column(0, "op", pa.array(ops, pa.string()))


def build(events: DataStream) -> DataStream:
    return (
        events.map_batches(pairs_of).key_by("pair").process_batches(LatestBids()).uid("q18-latest")
    )
