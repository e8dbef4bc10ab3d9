"""Q11 (user sessions): each bidder's bid count per session, a session ending after 10 s idle.

Rows carry the session's start and end. As in Flink, a session spans [first bid, last bid +
10 s), and bids exactly 10 s apart share one.

Built as one vectorized step and one windowed step:

1. `BidsPerBidder` (`map_batches`) makes one row per bidder of a batch: bidder, bids (the
   count), first and last (the earliest and latest bid's times), stamped with `first`;
2. those rows keyed by bidder in event-time session windows whose gap each row sets
   (`last - first + 10 s`, so a row's window is [first, last + 10 s)), counted
   (`CountBids`: the rows' `bids` added) and written with the session's bounds
   (`BidderWindowRow`).

Exact when the row's window is its bids' own [time, time + 10 s) windows merged, which
needs them at most 10 s apart, and when merging them at once is merging them one by one,
which needs none of them late: a window that is late and touches no open session is
dropped, so which bids of a batch survive would depend on their order. Both hold for bids
whose windows end after the largest event time this step has seen (`time > latest - 10 s
+ 1`, so also within 10 s of each other), since the watermark never passes that time (the
step runs in the source's task, whose watermark trails what it emitted, and the window
operator takes each arriving frame, which holds one batch's rows for its channel whole,
at one watermark). A bidder with any other bid in the batch keeps its bids as they came,
one row each (a row of one bid has that bid's own window). What the step remembers (the
largest time) is not state: a fresh step knows an earlier time and groups more, which is
still exact, as the restored job's watermark starts over too.

>>> from barrierflow.nexmark.events_file import record_batch_of
>>> from barrierflow.nexmark.model import Bid
>>> from barrierflow.nexmark.queries._columns import with_event_times
>>> events = record_batch_of([
...     Bid(1, bidder, 10, "Google", "", time, "")
...     for bidder, time in [(7, 31_000), (8, 20_000), (7, 30_000), (8, 35_000), (9, 36_000)]
... ])
>>> BidsPerBidder()(with_event_times(events)).to_pylist()  # doctest: +NORMALIZE_WHITESPACE
[{'bidder': 8, 'bids': 1, 'first': 20000, 'last': 20000, '_timestamp': 20000},
 {'bidder': 8, 'bids': 1, 'first': 35000, 'last': 35000, '_timestamp': 35000},
 {'bidder': 7, 'bids': 2, 'first': 30000, 'last': 31000, '_timestamp': 30000},
 {'bidder': 9, 'bids': 1, 'first': 36000, 'last': 36000, '_timestamp': 36000}]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from barrierflow import DataStream
from barrierflow.functions import AggregateFunction
from barrierflow.nexmark.queries._columns import EVENT_TIME, bids_of, column, event_times_of
from barrierflow.nexmark.queries._window_rows import BidderWindowRow
from barrierflow.window import DynamicEventTimeSessionWindows

__all__ = ["COLUMNS", "UPDATING", "BidsPerBidder", "CountBids", "build"]

COLUMNS = ("bidder", "bid_count", "starttime", "endtime")
UPDATING = False

GAP_MS = 10_000

_NOTHING_SEEN = np.iinfo(np.int64).min


class BidsPerBidder:
    """The `map_batches` function: a batch's bids, one row per bidder (see the module)."""

    def __init__(self) -> None:
        self.latest = _NOTHING_SEEN
        """The largest event time seen (of any event: they all move the watermark)."""

    def __call__(self, events: pa.RecordBatch) -> pa.Table:
        seen = event_times_of(events)
        if len(seen):
            self.latest = max(self.latest, int(seen.max()))
        bids = bids_of(events)
        bidders = column(bids, "bidder")
        times = event_times_of(bids)
        # A bid whose window [time, time + GAP) could be late: its last instant is at most
        # `latest`, which the watermark never passes. Its bidder's bids come as they came.
        may_be_late = times <= self.latest - (GAP_MS - 1)
        as_they_came = pc.is_null(bidders).to_numpy(zero_copy_only=False)
        if may_be_late.any():
            as_they_came |= pc.is_in(
                bidders, value_set=bidders.filter(pa.array(may_be_late))
            ).to_numpy(zero_copy_only=False)
        single = pa.array(as_they_came)
        single_times = pa.array(times[as_they_came], pa.int64())
        singles = pa.table(
            {
                "bidder": bidders.filter(single),
                "bids": pa.repeat(1, len(single_times)).cast(pa.int64()),
                "first": single_times,
                "last": single_times,
                EVENT_TIME: single_times,
            }
        )
        runs = (
            pa.table({"bidder": bidders, "time": times})
            .filter(pc.invert(single))
            .group_by("bidder", use_threads=False)
            .aggregate([([], "count_all"), ("time", "min"), ("time", "max")])
        )
        grouped = pa.table(
            {
                "bidder": runs.column("bidder"),
                "bids": runs.column("count_all"),
                "first": runs.column("time_min"),
                "last": runs.column("time_max"),
                EVENT_TIME: runs.column("time_min"),
            }
        )
        return pa.concat_tables([singles, grouped])


def run_gap(row: dict[str, Any]) -> int:
    """The gap that makes a run's window [first, last + 10 s): its row's timestamp is first."""
    return row["last"] - row["first"] + GAP_MS


class CountBids(AggregateFunction):
    """How many bids a session holds (sessions merge by adding their counts)."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: dict[str, Any], accumulator: int) -> int:
        return accumulator + value["bids"]

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


def build(events: DataStream) -> DataStream:
    return (
        events.map_batches(BidsPerBidder())
        .name("q11-bid-runs")
        .key_by("bidder")
        .window(DynamicEventTimeSessionWindows.with_dynamic_gap(run_gap))
        .aggregate(CountBids(), BidderWindowRow())
        .uid("q11-sessions")
    )
