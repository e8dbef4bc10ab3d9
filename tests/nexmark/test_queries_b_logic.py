"""The logic of q3, q4, q9, q15-q20 event by event: changelog rows, the mini-batched aggregate,
the auction/best-bid join and its state cleanup, the per-query functions (no Spark).

Functions run inside their real operator (`KeyedProcessOperator`) driven by hand: records,
watermarks, snapshots."""

from __future__ import annotations

from collections import Counter

import pytest
from support.clocks import ManualClock
from support.operator_harness import started

from barrierflow import StreamExecutionEnvironment
from barrierflow.nexmark.model import Auction, Bid, Person
from barrierflow.nexmark.queries import query
from barrierflow.nexmark.queries._auction_bids import auction_id
from barrierflow.nexmark.queries._bid_statistics import day_of, flink_avg, minute_of, price_rank
from barrierflow.nexmark.queries._changelog import changes, rank_changes
from barrierflow.nexmark.queries.q3 import SellerJoin, seller_id
from barrierflow.nexmark.queries.q4 import CategoryAverage, HighestBid, MaxChange
from barrierflow.nexmark.queries.q9 import WinningBid
from barrierflow.nexmark.queries.q16 import ChannelDayStatistics, channel_and_day
from barrierflow.nexmark.queries.q17 import AuctionDayStatistics, auction_and_day
from barrierflow.nexmark.queries.q18 import LatestBid
from barrierflow.nexmark.queries.q19 import TopBids
from barrierflow.nexmark.queries.q20 import BidWithAuction
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.elements import Watermark
from barrierflow.runtime.operators.base import RestoredState
from barrierflow.runtime.operators.keyed import KeyedProcessOperator
from barrierflow.runtime.timers import timer_section
from barrierflow.state.backend import canonical_section

MIDNIGHT = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def auction(id_: int, start: int, expires: int, category: int = 10, seller: int = 1) -> Auction:
    return Auction(id_, f"item{id_}", "desc", 100, 200, start, expires, seller, category, "ax")


def bid(auction_id: int, price: int, at: int, bidder: int = 1, extra: str = "") -> Bid:
    return Bid(auction_id, bidder, price, "Google", "https://u", at, extra)


def person(id_: int, state: str) -> Person:
    return Person(id_, f"p{id_}", "e", "c", "Boise", state, 0, "")


class Driven:
    """A keyed process function in its operator, fed by hand; `out()` takes its records."""

    def __init__(self, function, key, restored=None) -> None:
        self.operator = KeyedProcessOperator("op", "op", key, function)
        started(self.operator, ManualClock(), restored)

    def feed(self, *events) -> list:
        """Events with their `date_time` as timestamp; returns the records emitted."""
        self.operator.process_batch(RecordBatch(list(events), [e.date_time for e in events]))
        return self.out()

    def feed_values(self, *values) -> list:
        """Values without a timestamp; returns the records emitted."""
        self.operator.process_batch(RecordBatch(list(values), None))
        return self.out()

    def watermark(self, timestamp: int) -> list:
        self.operator.process_watermark(Watermark(timestamp))
        return self.out()

    def out(self) -> list:
        return [event[1] for event in self.operator.output.take() if event[0] == "record"]

    def keys(self, state: str) -> list:
        return list(self.operator.backend.keys(state))


def ops(rows: list[dict]) -> list[tuple]:
    """Each changelog row as (op, the other values...)."""
    return [(row["op"], *(v for k, v in row.items() if k != "op")) for row in rows]


# -- changelog rows -------------------------------------------------------------------------


def test_changes_insert_update_delete_and_nothing_for_an_unchanged_row():
    columns = ("k", "n")
    assert changes(columns, None, ("a", 1)) == [{"op": "+I", "k": "a", "n": 1}]
    assert ops(changes(columns, ("a", 1), ("a", 2))) == [("-U", "a", 1), ("+U", "a", 2)]
    assert changes(columns, ("a", 2), ("a", 2)) == []
    assert changes(columns, ("a", 2), None) == [{"op": "-D", "k": "a", "n": 2}]
    assert changes(columns, None, None) == []


def test_rank_changes_shift_every_rank_below_a_new_first_row():
    before = [("b",), ("c",)]
    after = [("a",), ("b",), ("c",)]
    assert ops(rank_changes(("bid", "rank"), before, after)) == [
        ("-U", "b", 1), ("+U", "a", 1), ("-U", "c", 2), ("+U", "b", 2), ("+I", "c", 3),
    ]  # fmt: skip


def test_rank_changes_leave_out_the_ranks_whose_row_stayed():
    before = [("a",), ("c",), ("d",)]
    after = [("a",), ("b",), ("d",)]
    assert ops(rank_changes(("bid", "rank"), before, after)) == [("-U", "c", 2), ("+U", "b", 2)]
    assert rank_changes(("bid", "rank"), after, after) == []
    assert ops(rank_changes(("bid", "rank"), after, after[:2])) == [("-D", "d", 3)]


# -- what q15-q17 compute -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("price", "rank"), [(0, 1), (9_999, 1), (10_000, 2), (999_999, 2), (1_000_000, 3)]
)
def test_price_ranks_cut_where_the_filters_do(price, rank):
    assert price_rank(price) == rank


def test_days_and_minutes_are_utc_and_change_at_midnight():
    assert (day_of(MIDNIGHT - 1), minute_of(MIDNIGHT - 1)) == ("2025-12-31", "23:59")
    assert (day_of(MIDNIGHT), minute_of(MIDNIGHT)) == ("2026-01-01", "00:00")
    assert minute_of(MIDNIGHT + 13 * 3_600_000 + 5 * 60_000 + 59_999) == "13:05"


def test_flink_avg_truncates_toward_zero_like_java_long_division():
    assert [flink_avg(7, 2), flink_avg(-7, 2), flink_avg(6, 3), flink_avg(-1, 3)] == [3, -3, 2, 0]
    assert flink_avg(2**62 + 1, 2) == 2**61  # exact beyond a double's 53 bits


def q16_operator(restored=None) -> Driven:
    return Driven(ChannelDayStatistics(), channel_and_day, restored)


def q16_bid(bidder: int, auction_id: int, price: int, at: int) -> Bid:
    return Bid(auction_id, bidder, price, "Google", "https://u", at, "")


STATISTICS_BIDS = [
    (1, 10, 5, 3), (1, 10, 6, 9), (2, 10, 50_000, 4), (3, 11, 2_000_000, 1), (1, 12, 7, 2),
    (2, 12, 9, 5),
]  # fmt: skip


def test_bid_statistics_count_bids_and_distinct_values_in_all_and_per_rank():
    op = q16_operator()
    op.feed(*(q16_bid(*b) for b in STATISTICS_BIDS[:5]))
    # 5 bids (3 rank 1, 1 rank 2, 1 rank 3); bidders {1, 2, 3}, per rank {1}, {2}, {3};
    # auctions {10, 11, 12}, per rank {10, 12}, {10}, {11}; latest 9 ms after midnight
    assert ops(op.watermark(MIDNIGHT)) == [
        ("+I", "Google", "1970-01-01", "00:00", 5, 3, 1, 1, 3, 1, 1, 1, 3, 2, 1, 1)
    ]
    op.feed(q16_bid(*STATISTICS_BIDS[5]))  # bidder 2 now in rank 1 too; auction 12 known
    assert ops(op.watermark(MIDNIGHT + 1))[1] == (
        "+U", "Google", "1970-01-01", "00:00", 6, 4, 1, 1, 3, 2, 1, 1, 3, 2, 1, 1,
    )  # fmt: skip
    assert sorted(op.keys("bidders")) == [("Google", "1970-01-01")]


def test_bid_statistics_survive_a_snapshot_held_while_bids_go_on_and_a_restore():
    op = q16_operator()
    op.feed(*(q16_bid(*b) for b in STATISTICS_BIDS[:3]))
    snapshot = op.operator.snapshot_state(1)  # held while more bids are counted
    op.feed(*(q16_bid(*b) for b in STATISTICS_BIDS[3:]))
    again = q16_operator(
        RestoredState(
            keyed=[canonical_section(snapshot.keyed)], timers=[timer_section(snapshot.timers)]
        )
    )
    # the restored operator has the first three bids only: it counts the rest anew
    again.feed(*(q16_bid(*b) for b in STATISTICS_BIDS[3:]))
    assert (
        ops(again.watermark(MIDNIGHT))
        == ops(op.watermark(MIDNIGHT))
        == [("+I", "Google", "1970-01-01", "00:00", 6, 4, 1, 1, 3, 2, 1, 1, 3, 2, 1, 1)]
    )


# -- the mini-batched aggregate (q17's) ------------------------------------------------------


def q17_operator(restored=None) -> Driven:
    return Driven(AuctionDayStatistics(), auction_and_day, restored)


def test_a_mini_batch_aggregate_emits_a_keys_change_at_the_next_watermark_only():
    op = q17_operator()
    assert op.feed(bid(7, 100, MIDNIGHT), bid(7, 20_000, MIDNIGHT + 1)) == []
    assert ops(op.watermark(MIDNIGHT)) == [
        ("+I", 7, "2026-01-01", 2, 1, 1, 0, 100, 20_000, 10_050, 20_100)
    ]
    assert op.feed(bid(7, 2_000_001, MIDNIGHT + 2)) == []
    assert ops(op.watermark(MIDNIGHT + 1)) == [
        ("-U", 7, "2026-01-01", 2, 1, 1, 0, 100, 20_000, 10_050, 20_100),
        ("+U", 7, "2026-01-01", 3, 1, 1, 1, 100, 2_000_001, 673_367, 2_020_101),
    ]
    assert op.watermark(MIDNIGHT + 2) == []  # nothing new: nothing emitted


def test_a_mini_batch_aggregate_keeps_its_accumulator_and_pending_emission_across_a_restore():
    op = q17_operator()
    op.feed(bid(7, 100, MIDNIGHT))
    op.watermark(MIDNIGHT)
    op.feed(bid(7, 300, MIDNIGHT + 5))
    snapshot = op.operator.snapshot_state(1)
    again = q17_operator(
        RestoredState(
            keyed=[canonical_section(snapshot.keyed)], timers=[timer_section(snapshot.timers)]
        )
    )
    assert ops(again.watermark(MIDNIGHT + 1)) == [
        ("-U", 7, "2026-01-01", 1, 1, 0, 0, 100, 100, 100, 100),
        ("+U", 7, "2026-01-01", 2, 2, 0, 0, 100, 300, 200, 400),
    ]


# -- q19: top 10 -----------------------------------------------------------------------------


def test_top_bids_keep_the_ten_best_with_earlier_then_smaller_bidder_first_on_equal_price():
    top: list = []
    topper = TopBids()
    for i in range(12):
        topper.add(top, bid(1, 100 + i, 50 - i, bidder=i))
    topper.add(top, bid(1, 111, 40, bidder=0))  # ties 111 (bidder 11) at the same time
    topper.add(top, bid(1, 111, 30, bidder=20))  # ties 111, earlier
    topper.add(top, bid(1, 50, 0, bidder=30))  # cheaper than all ten
    rows = topper.result(1, top)
    assert [(r[2], r[5], r[1]) for r in rows] == [
        (111, 30, 20), (111, 39, 11), (111, 40, 0), (110, 40, 10), (109, 41, 9),
        (108, 42, 8), (107, 43, 7), (106, 44, 6), (105, 45, 5), (104, 46, 4),
    ]  # fmt: skip


def test_top_bids_emit_only_the_ranks_that_changed_and_nothing_for_a_bid_below_the_ten():
    op = Driven(TopBids(), lambda b: b.auction)
    op.feed(*(bid(1, 100 + i, i) for i in range(10)))
    assert len(op.watermark(100)) == 10  # ten +I
    op.feed(bid(1, 1, 200))
    assert op.watermark(300) == []
    op.feed(bid(1, 105, 300))  # after the 105 of time 5: rank 5 and below shift
    assert [(r["op"], r["price"], r["rank_number"]) for r in op.watermark(400)] == [
        ("-U", 104, 6), ("+U", 105, 6), ("-U", 103, 7), ("+U", 104, 7), ("-U", 102, 8),
        ("+U", 103, 8), ("-U", 101, 9), ("+U", 102, 9), ("-U", 100, 10), ("+U", 101, 10),
    ]  # fmt: skip


# -- q4 and q9: each auction's best bid within its lifetime -------------------------------


def q9_operator() -> Driven:
    return Driven(WinningBid(), auction_id)


def test_bids_count_from_the_auctions_start_to_its_expiry_both_inclusive():
    op = q9_operator()
    op.feed(auction(5, 1_000, 2_000))
    assert op.feed(bid(5, 900, 999), bid(5, 950, 2_001)) == []
    first = op.feed(bid(5, 10, 1_000))
    assert [(r["op"], r["price"]) for r in first] == [("+I", 10)]
    last = op.feed(bid(5, 20, 2_000))
    assert [(r["op"], r["price"]) for r in last] == [("-U", 10), ("+U", 20)]
    assert last[1]["id"] == 5 and last[1]["bid_dateTime"] == 2_000 and last[1]["expires"] == 2_000


def test_the_winner_is_the_highest_then_earliest_then_smallest_bidder_then_extra():
    op = q9_operator()
    op.feed(auction(5, 0, 100))
    op.feed(bid(5, 50, 20, bidder=3, extra="b"))
    assert op.feed(bid(5, 50, 30, bidder=1)) == []  # later
    assert op.feed(bid(5, 50, 20, bidder=4)) == []  # same time, greater bidder
    changed = op.feed(bid(5, 50, 20, bidder=3, extra="a"))
    assert [(r["op"], r["bidder"], r["bid_extra"]) for r in changed] == [
        ("-U", 3, "b"), ("+U", 3, "a"),
    ]  # fmt: skip
    assert op.feed(bid(5, 50, 20, bidder=3, extra="a")) == []  # the same row


def test_a_bid_before_its_auction_waits_for_it_until_the_watermark_passes_the_bid():
    op = q9_operator()
    op.watermark(100)
    assert op.feed(bid(5, 70, 100)) == []  # not after the watermark: never stored
    assert op.feed(bid(5, 80, 150), bid(6, 90, 160)) == []
    assert sorted(op.keys("early-bids")) == [5, 6]
    rows = op.feed(auction(5, 120, 300))
    assert [(r["op"], r["price"]) for r in rows] == [("+I", 80)]
    op.watermark(160)  # bid 6 of time 160: an auction still to come starts after it
    assert op.keys("early-bids") == []
    assert op.feed(auction(6, 161, 300)) == []


def test_an_auctions_state_goes_when_the_watermark_reaches_its_expiry():
    op = q9_operator()
    op.feed(auction(5, 0, 1_000), auction(6, 0, 5_000))
    op.feed(bid(5, 10, 500), bid(6, 10, 500))
    op.watermark(999)
    assert sorted(op.keys("auction")) == [5, 6]
    op.watermark(1_000)
    assert op.keys("auction") == [6] and op.keys("best-bid") == [6]
    assert op.feed(bid(5, 99, 1_500)) == []  # after expiry: not its lifetime anyway
    op.watermark(1_500)
    assert op.keys("early-bids") == []


def test_q4_emits_each_rise_of_an_auctions_maximum_and_averages_them_per_category():
    highest = Driven(HighestBid(), auction_id)
    highest.feed(auction(1, 0, 100, category=10), auction(2, 0, 100, category=10))
    changes_ = highest.feed(bid(1, 5, 1), bid(1, 4, 2), bid(2, 6, 3), bid(1, 8, 4), bid(2, 6, 5))
    assert changes_ == [MaxChange(10, None, 5), MaxChange(10, None, 6), MaxChange(10, 5, 8)]
    average = Driven(CategoryAverage(), lambda c: c.category)
    average.feed_values(changes_[0])
    assert ops(average.watermark(1)) == [("+I", 10, 5)]
    average.feed_values(changes_[1])
    assert average.watermark(2) == []  # (5 + 6) / 2 truncates to 5: unchanged
    average.feed_values(changes_[2])
    assert ops(average.watermark(3)) == [("-U", 10, 5), ("+U", 10, 7)]


# -- q18: the latest bid of each bidder on each auction ----------------------------------------


def test_q18_keeps_the_latest_bid_by_time_and_the_greater_price_on_equal_time():
    op = Driven(LatestBid(), lambda b: (b.bidder, b.auction))
    assert [r["op"] for r in op.feed(bid(1, 10, 100))] == ["+I"]
    assert op.feed(bid(1, 99, 50)) == []  # older, though it arrived later
    assert [(r["op"], r["price"]) for r in op.feed(bid(1, 5, 100))] == []  # smaller on a tie
    assert [(r["op"], r["price"]) for r in op.feed(bid(1, 20, 100))] == [("-U", 10), ("+U", 20)]
    assert [(r["op"], r["dateTime"]) for r in op.feed(bid(1, 1, 101))] == [
        ("-U", 100), ("+U", 101),
    ]  # fmt: skip


# -- q3 and q20: append-only joins -----------------------------------------------------------


def test_q3_pairs_each_auction_with_its_seller_whichever_comes_first():
    op = Driven(SellerJoin(), seller_id)
    assert op.feed(auction(1, 0, 9, seller=7)) == []
    rows = op.feed(person(7, "OR"))
    assert rows == [{"name": "p7", "city": "Boise", "state": "OR", "id": 1}]
    assert op.feed(auction(2, 1, 9, seller=7)) == [
        {"name": "p7", "city": "Boise", "state": "OR", "id": 2}
    ]


def test_q20_joins_early_and_later_bids_of_a_category_10_auction_and_keeps_no_bid_after():
    op = Driven(BidWithAuction(), auction_id)
    assert op.feed(bid(1, 10, 5), bid(2, 20, 6)) == []
    rows = op.feed(auction(1, 0, 9, category=10), auction(2, 0, 9, category=11))
    assert [(r["auction"], r["price"], r["itemName"], r["auction_extra"]) for r in rows] == [
        (1, 10, "item1", "ax")
    ]
    assert op.keys("early-bids") == []
    later = op.feed(bid(1, 30, 7), bid(2, 40, 8))
    assert [(r["auction"], r["price"], r["bid_dateTime"]) for r in later] == [(1, 30, 7)]
    assert op.keys("early-bids") == []
    assert list(later[0]) == list(query("q20").columns)


# -- the queries as jobs ---------------------------------------------------------------------

UIDS = {
    "q3": {"q3-join"},
    "q4": {"q4-max", "q4-average"},
    "q9": {"q9-winning-bid"},
    "q15": {"q15-statistics"},
    "q16": {"q16-statistics"},
    "q17": {"q17-statistics"},
    "q18": {"q18-latest"},
    "q19": {"q19-top-bids"},
    "q20": {"q20-join"},
}


@pytest.mark.parametrize("name", sorted(UIDS))
def test_each_query_builds_a_job_whose_stateful_operators_have_their_uids(name):
    env = StreamExecutionEnvironment.get_execution_environment()
    the_query = query(name)
    the_query.build(env.from_collection([bid(1, 1, 0)])).print()
    uids = Counter(op.uid for v in env.get_job_graph().vertices for op in v.operators)
    assert UIDS[name] <= set(uids)
    assert the_query.updating == (name not in ("q3", "q20"))
    assert the_query.description.startswith(f"{name.upper()} (")
