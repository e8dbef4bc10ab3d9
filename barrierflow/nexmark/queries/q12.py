"""Q12 (processing-time windows): each bidder's bid count per 10 s of processing time.

Rows carry the window's start and end (epoch ms of the wall clock).

Built on the batch path: `bidders_of` (`map_batches`) counts a batch's bids per bidder
in Arrow (one row per bidder, so only those counts cross the network, hashed by their
Arrow column), the counts are keyed by bidder, and `CountPerWindow` (`process_batches`)
adds them into each bidder's open window with one batched state read and one batched
write (the window's count is keyed state; one processing-time timer per (bidder,
window) at the window's last millisecond emits its row, as a tumbling processing-time
window would). Which
window a bid falls in depends on when it is processed, so only the totals per bidder and
the windows' alignment (whole multiples of 10 s of the wall clock, epoch ms) are
reproducible. `CountBids` and `BidderWindowRow` are the per-record window functions the
query was built with before (kept for q11's rows and the tests of the window path).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, KeyedBatchFunction
from barrierflow.nexmark.model import Bid
from barrierflow.nexmark.queries._columns import bids_of
from barrierflow.nexmark.queries._window_rows import BidderWindowRow
from barrierflow.state import ValueStateDescriptor

__all__ = ["COLUMNS", "UPDATING", "BidderWindowRow", "CountPerWindow", "bidders_of", "build"]

COLUMNS = ("bidder", "bid_count", "starttime", "endtime")
UPDATING = False

WINDOW = Duration.of_seconds(10)
_SIZE = WINDOW.to_milliseconds()


class CountBids(AggregateFunction):
    """How many bids a window holds."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


def bidder_of(bid: Bid) -> int:
    return bid.bidder


def bidders_of(events: pa.RecordBatch) -> pa.RecordBatch | None:
    """The `map_batches` step: one row per bidder of the batch's bids (`bidder`) with how
    many bids it made (`bids`). `events` is the Arrow events shape (`event_type` and a
    `bid` struct), or model events made Arrow rows, where only the bids have a `bidder`."""
    names = events.schema.names
    if "event_type" in names:
        bids = bids_of(events)
        bidders = pc.struct_field(bids.column("bid"), "bidder")
    elif "bidder" in names:
        bidders = events.column("bidder").drop_null()
    else:
        return None
    counts = (
        pa.table({"bidder": bidders})
        .group_by("bidder", use_threads=False)
        .aggregate([([], "count_all")])
    )
    return pa.RecordBatch.from_arrays(
        [counts.column("bidder").combine_chunks(), counts.column("count_all").combine_chunks()],
        names=["bidder", "bids"],
    )


class CountPerWindow(KeyedBatchFunction):
    """Each bidder's bids per tumbling 10 s window of processing time (module docstring).

    A bidder's state is a flat tuple (start, count, start, count, ...) of its open
    windows (usually one; two when a window's timer has not fired yet as the next opens):
    only ints, so the heap backend never copies it for a snapshot in flight.
    """

    def open(self, runtime_context: Any) -> None:
        self.windows = runtime_context.get_batch_state(ValueStateDescriptor("q12-windows"))

    def process_batch(self, batch: Any, keys: list[Any], ctx: Any) -> None:
        if isinstance(batch, pa.RecordBatch):
            counts = batch.column("bids").to_pylist()
        else:
            counts = [row["bids"] for row in batch]
        if len(set(keys)) != len(keys):  # a bidder twice in one batch: add its counts
            merged: Counter = Counter()
            for key, count in zip(keys, counts, strict=True):
                merged[key] += count
            keys, counts = list(merged), list(merged.values())
        now = ctx.current_processing_time()
        start = now - now % _SIZE
        new_windows = []
        updated = []
        for key, count, held in zip(keys, counts, self.windows.get_many(keys), strict=True):
            updated.append(_add(held, start, count))
            if held is None or start not in held[::2]:
                new_windows.append(key)
        self.windows.put_many(keys, updated)
        ctx.register_processing_time_timers(new_windows, start + _SIZE - 1)

    def on_timer(self, timestamp: int, ctx: Any) -> list[dict] | None:
        bidder = ctx.get_current_key()
        start = timestamp + 1 - _SIZE
        (held,) = self.windows.get_many([bidder])
        if held is None:
            return None
        rest: list[int] = []
        fired = None
        for i in range(0, len(held), 2):
            if held[i] == start:
                fired = held[i + 1]
            else:
                rest += held[i : i + 2]
        self.windows.put_many([bidder], [tuple(rest) or None])
        if fired is None:
            return None
        return [
            {"bidder": bidder, "bid_count": fired, "starttime": start, "endtime": start + _SIZE}
        ]


def _add(held: tuple[int, ...] | None, start: int, count: int) -> tuple[int, ...]:
    """`held` with `count` more bids in the window starting at `start`."""
    if held is None:
        return (start, count)
    for i in range(0, len(held), 2):
        if held[i] == start:
            return (*held[:i], start, held[i + 1] + count, *held[i + 2 :])
    return (*held, start, count)


def build(events: DataStream) -> DataStream:
    return (
        events.map_batches(bidders_of, keep_event_time=False)
        .key_by("bidder")
        .process_batches(CountPerWindow())
        .uid("q12-count")
    )
