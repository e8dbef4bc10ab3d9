"""`BidderWindowRow`: a bidder's bid count in a window as a row, for q11 (sessions) and q12
(processing-time windows), which write the same columns."""

from __future__ import annotations

from typing import Any

from barrierflow.functions import ProcessWindowFunction

__all__ = ["BidderWindowRow"]


class BidderWindowRow(ProcessWindowFunction):
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
