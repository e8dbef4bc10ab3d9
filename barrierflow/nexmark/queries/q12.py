"""Q12 (processing-time windows): each bidder's bid count per 10 s of processing time.

Rows carry the window's start and end (epoch ms of the wall clock).

Built as bids keyed by bidder in tumbling processing-time windows, counted (`CountBids`)
and written with the window's bounds (`WindowRow`). Which window a bid falls in depends
on when it is processed, so only the totals per bidder and the windows' alignment (whole
multiples of 10 s of the wall clock, epoch ms) are reproducible.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.nexmark.model import Bid
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


class WindowRow(ProcessWindowFunction):
    """The bidder's count in the window, with the window's start and end."""

    def process(self, bidder: int, context: Any, counts: Any) -> Any:
        window = context.window()
        for count in counts:
            yield {
                "bidder": bidder,
                "bid_count": count,
                "starttime": window.start,
                "endtime": window.end,
            }


def is_bid(event: Any) -> bool:
    return type(event) is Bid


def bidder_of(bid: Bid) -> int:
    return bid.bidder


def build(events: DataStream) -> DataStream:
    return (
        events.filter(is_bid)
        .key_by(bidder_of)
        .window(TumblingProcessingTimeWindows.of(WINDOW))
        .aggregate(CountBids(), WindowRow())
        .uid("q12-count")
    )
