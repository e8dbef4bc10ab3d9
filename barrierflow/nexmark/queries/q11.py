"""Q11 (user sessions): each bidder's bid count per session, a session ending after 10 s idle.

Rows carry the session's start and end.

Built as bids keyed by bidder in event-time session windows with a 10 s gap, counted
(`CountBids`) and written with the session's bounds (`SessionRow`). As in Flink, a
session spans [first bid, last bid + 10 s), and bids exactly 10 s apart share one.
"""

from __future__ import annotations

from typing import Any

from barrierflow import DataStream, Duration
from barrierflow.functions import AggregateFunction, ProcessWindowFunction
from barrierflow.nexmark.model import Bid
from barrierflow.window import EventTimeSessionWindows

__all__ = ["COLUMNS", "UPDATING", "build"]

COLUMNS = ("bidder", "bid_count", "starttime", "endtime")
UPDATING = False

GAP = Duration.of_seconds(10)


class CountBids(AggregateFunction):
    """How many bids a window holds (sessions merge by adding their counts)."""

    def create_accumulator(self) -> int:
        return 0

    def add(self, value: Any, accumulator: int) -> int:
        return accumulator + 1

    def get_result(self, accumulator: int) -> int:
        return accumulator

    def merge(self, acc_a: int, acc_b: int) -> int:
        return acc_a + acc_b


class SessionRow(ProcessWindowFunction):
    """The bidder's count in the session, with the session's start and end."""

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
        .window(EventTimeSessionWindows.with_gap(GAP))
        .aggregate(CountBids(), SessionRow())
        .uid("q11-sessions")
    )
