"""Q12 (processing-time windows): each bidder's bid count per 10 s of processing time.

Rows carry the window's start and end (epoch ms of the wall clock).

Built as bids keyed by bidder in tumbling processing-time windows, counted (`CountBids`)
and written with the window's bounds (`BidderWindowRow`). Which window a bid falls in depends
on when it is processed, so only the totals per bidder and the windows' alignment (whole
multiples of 10 s of the wall clock, epoch ms) are reproducible.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction
from barrierflow.nexmark.model import Bid, is_bid
from barrierflow.nexmark.queries._window_rows import BidderWindowRow
from barrierflow.window import TumblingProcessingTimeWindows

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("bidder", "bid_count", "starttime", "endtime")
UPDATING = False

WINDOW = Duration.of_seconds(10)


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


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_bid)
        .key_by(bidder_of)
        .window(TumblingProcessingTimeWindows.of(WINDOW))
        .aggregate(CountBids(), BidderWindowRow())
        .uid("q12-count")
    )
